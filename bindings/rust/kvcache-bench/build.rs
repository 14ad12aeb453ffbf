//! Compiles c/baseline.c (the C side of the benchmark) with the system C
//! compiler (`CC`, default `cc`) at -O2 into a static library, against the
//! headers kvcache-sys found, and links the binary with an rpath to the
//! library kvcache-sys found.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed: {status}");
}

fn version_of(program: &str, arg: &str) -> String {
    Command::new(program)
        .arg(arg)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn main() {
    println!("cargo:rerun-if-changed=c/baseline.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let includes = env::var("DEP_KVCACHE_INCLUDE").unwrap_or_default();
    let object = out.join("baseline.o");

    let mut compile = Command::new(&cc);
    compile.args([
        "-O2", "-std=c99", "-fPIC", "-Wall", "-Wextra", "-Werror", "-c",
    ]);
    for dir in includes.split(':').filter(|d| !d.is_empty()) {
        compile.arg(format!("-I{dir}"));
    }
    compile.arg("c/baseline.c").arg("-o").arg(&object);
    run(&mut compile);
    run(Command::new("ar")
        .arg("crs")
        .arg(out.join("libkvcbench_baseline.a"))
        .arg(&object));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=kvcbench_baseline");

    let rpath = env::var("DEP_KVCACHE_RPATH").unwrap_or_default();
    for dir in rpath.split(':').filter(|d| !d.is_empty()) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    println!(
        "cargo:rustc-env=BENCH_RUSTC={}",
        version_of(&rustc, "--version")
    );
    println!("cargo:rustc-env=BENCH_CC={}", version_of(&cc, "--version"));
}
