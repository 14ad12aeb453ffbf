//! Lets this crate's own tests and examples find libkvcache at run time
//! when run directly: kvcache-sys passes on the run-time library folders
//! that pkg-config reported (a build tree's kvcache-uninstalled.pc carries an
//! rpath) as DEP_KVCACHE_RPATH. Crates that depend on kvcache run under
//! `cargo run` / `cargo test` with no setting (kvcache-sys names a folder of
//! links to the library inside the target directory, which cargo puts on the
//! loader's path); started directly, they need the library on the loader's
//! path (README, "Running").

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_KVCACHE_RPATH");
    let rpath = std::env::var("DEP_KVCACHE_RPATH").unwrap_or_default();
    for dir in rpath.split(':').filter(|d| !d.is_empty()) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
