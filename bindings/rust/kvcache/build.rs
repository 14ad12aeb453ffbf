//! Lets this crate's own tests and examples find libkvcache at run time:
//! kvcache-sys passes on the run-time library folders that pkg-config
//! reported (a build tree's kvcache-uninstalled.pc carries an rpath) as
//! DEP_KVCACHE_RPATH. Crates that depend on kvcache link it through
//! kvcache-sys; they run against an installed library, or with
//! LD_LIBRARY_PATH naming the build folder.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_KVCACHE_RPATH");
    let rpath = std::env::var("DEP_KVCACHE_RPATH").unwrap_or_default();
    for dir in rpath.split(':').filter(|d| !d.is_empty()) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
