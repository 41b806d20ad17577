//! Build script of `gaspi`: with feature `gpi2`, embed the directory of
//! the GPI-2 library that gpi2-sys found (`DEP_GPI2_LIBDIR`) as a run path
//! of this package's binaries, examples and tests, so that they start
//! without `LD_LIBRARY_PATH` (a dependency's link arguments do not reach
//! its dependents' binaries). Nothing without the feature.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_GPI2_LIBDIR");
    if std::env::var_os("CARGO_FEATURE_GPI2").is_none() {
        return;
    }
    if let Some(dir) = std::env::var_os("DEP_GPI2_LIBDIR") {
        let dir = dir.to_string_lossy();
        if !dir.is_empty() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
