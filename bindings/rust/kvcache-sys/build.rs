//! Finds libkvcache for the linker by running the `pkg-config` program (no
//! crates: the build must work offline).
//!
//! Where it looks, first match wins:
//! - `KVCACHE_BUILD_DIR`: a kvcache build folder; its
//!   `kvcache-uninstalled.pc` links that build without installing it;
//! - `PKG_CONFIG_PATH`, then pkg-config's default folders (an installed
//!   kvcache).
//!
//! `PKG_CONFIG` names another pkg-config program. The library folders are
//! passed on to crates that depend on this one as `DEP_KVCACHE_LIBDIR` and
//! `DEP_KVCACHE_RPATH`, and the header folders as `DEP_KVCACHE_INCLUDE` (all
//! `:`-separated), so that their tests can find the shared library at run
//! time and their C code the headers.
//!
//! Running: a library's build script cannot give the programs of the crates
//! that depend on it an rpath (`cargo:rustc-link-arg` reaches this
//! package's own targets only), but `cargo run` and `cargo test` put on the
//! loader's path every link-search folder inside the target directory. So
//! the script links `libkvcache.so*` of the folder found into
//! `$OUT_DIR/lib` and names that folder: any crate depending on kvcache
//! runs under cargo with no `LD_LIBRARY_PATH`. A program started directly
//! needs the library on the loader's path (README, "Running").

use std::env;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    for var in [
        "KVCACHE_BUILD_DIR",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG",
        "PKG_CONFIG_LIBDIR",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let program = env::var_os("PKG_CONFIG").unwrap_or_else(|| OsString::from("pkg-config"));
    let mut search: Vec<PathBuf> = Vec::new();
    if let Some(dir) = env::var_os("KVCACHE_BUILD_DIR") {
        let dir = PathBuf::from(dir);
        if !dir.join("kvcache-uninstalled.pc").is_file() {
            fail(&format!(
                "KVCACHE_BUILD_DIR={} holds no kvcache-uninstalled.pc; point it at a configured kvcache build folder",
                dir.display()
            ));
        }
        search.push(dir);
    }
    if let Some(paths) = env::var_os("PKG_CONFIG_PATH") {
        search.extend(env::split_paths(&paths));
    }

    let pkg_config = |what: &str| -> String {
        let mut cmd = Command::new(&program);
        cmd.args([what, "kvcache"]);
        if !search.is_empty() {
            match env::join_paths(&search) {
                Ok(joined) => {
                    cmd.env("PKG_CONFIG_PATH", joined);
                }
                Err(e) => fail(&format!("cannot build PKG_CONFIG_PATH: {e}")),
            }
        }
        let output = match cmd.output() {
            Ok(o) => o,
            Err(e) => fail(&format!(
                "could not run {:?} ({e}); install pkg-config or set PKG_CONFIG",
                program
            )),
        };
        if !output.status.success() {
            fail(&format!(
                "`{} {what} kvcache` failed: {}\nset KVCACHE_BUILD_DIR to a kvcache build folder, or PKG_CONFIG_PATH to the folder of kvcache.pc",
                program.to_string_lossy(),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let flags = pkg_config("--libs");
    let cflags = pkg_config("--cflags");
    let includes: Vec<&str> = cflags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I"))
        .collect();

    let mut libdirs: Vec<String> = Vec::new();
    let mut rpaths: Vec<String> = Vec::new();
    let mut linked = false;
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            libdirs.push(dir.to_owned());
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
            linked |= lib == "kvcache";
        } else if let Some(args) = flag.strip_prefix("-Wl,") {
            // -Wl,-rpath,DIR (the build tree's .pc carries one).
            let parts: Vec<&str> = args.split(',').collect();
            for pair in parts.windows(2) {
                if pair[0] == "-rpath" {
                    rpaths.push(pair[1].to_owned());
                }
            }
        }
    }
    if !linked {
        fail(&format!(
            "`pkg-config --libs kvcache` gave no -lkvcache: {flags}"
        ));
    }
    // This crate's own tests (the layout tests) run against that library.
    for dir in &rpaths {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    // Dependents run under cargo against it (see the top of this file).
    let run_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("lib");
    link_library_files(&libdirs, &run_dir);
    println!("cargo:rustc-link-search=native={}", run_dir.display());
    println!("cargo:libdir={}", libdirs.join(":"));
    println!("cargo:rpath={}", rpaths.join(":"));
    println!("cargo:include={}", includes.join(":"));
}

/// Makes `run_dir` hold symbolic links to the libkvcache.so* files of the
/// first of `libdirs` that has them, and nothing else.
fn link_library_files(libdirs: &[String], run_dir: &std::path::Path) {
    let _ = std::fs::remove_dir_all(run_dir);
    if let Err(e) = std::fs::create_dir_all(run_dir) {
        fail(&format!("cannot create {}: {e}", run_dir.display()));
    }
    for dir in libdirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(_) => continue,
        };
        let mut linked = false;
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_string_lossy().starts_with("libkvcache.so") {
                continue;
            }
            let link = run_dir.join(&name);
            if let Err(e) = std::os::unix::fs::symlink(entry.path(), &link) {
                fail(&format!("cannot link {}: {e}", link.display()));
            }
            linked = true;
        }
        if linked {
            return;
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("kvcache-sys: {message}");
    std::process::exit(1);
}
