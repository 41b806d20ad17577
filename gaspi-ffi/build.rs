//! Finds an installed GPI-2 (it never builds one), in this order:
//! 1. `GPI2_DIR`: an install prefix (`include/GASPI.h`, `lib64/` or `lib/`);
//! 2. pkg-config `GPI2` (GPI-2 installs `GPI2.pc`);
//! 3. common prefixes: `/opt/GPI2`, `/opt/gpi2`, `$HOME/GPI2`, `/usr/local`, `/usr`.
//!
//! Links `libGPI2`, or `libGPI2-dbg` with the `debug` feature or
//! `GPI2_DEBUG=1`: statically where the install has the archive (`.a`,
//! with the libraries its `GPI2.pc` lists as private), so that every
//! binary that depends on this crate, a user's too, runs without a run
//! path or `LD_LIBRARY_PATH`; `GPI2_LINK=dylib` links the shared library
//! instead (with a run path for this crate's own tests). An explicit
//! `GPI2_DIR` that holds no GPI-2 is an error, not a reason to look
//! elsewhere. Without GPI-2 the build fails with one message (no panic)
//! that lists every place it looked. With `DOCS_RS` set (docs.rs, or
//! `DOCS_RS=1 cargo doc`) it links nothing, so documentation builds
//! anywhere. The installed version (GPI2_VERSION.h) picks the layout of
//! `gaspi_config_t` (cfg `gpi2_1_6`).

use std::path::{Path, PathBuf};

struct Found {
    include: PathBuf,
    lib: PathBuf,
}

/// An install prefix with the header and a library directory.
fn at_prefix(prefix: &Path) -> Option<Found> {
    let include = prefix.join("include");
    if !include.join("GASPI.h").is_file() {
        return None;
    }
    ["lib64", "lib"]
        .iter()
        .map(|d| prefix.join(d))
        .find(|l| l.join("libGPI2.so").exists() || l.join("libGPI2.a").exists())
        .map(|lib| Found { include, lib })
}

fn pkg_config() -> Option<Found> {
    let lib = pkg_config::Config::new()
        .cargo_metadata(false)
        .env_metadata(false)
        .probe("GPI2")
        .ok()?;
    let include = lib
        .include_paths
        .into_iter()
        .find(|d| d.join("GASPI.h").is_file())?;
    let lib = lib.link_paths.into_iter().next()?;
    Some(Found { include, lib })
}

/// Fail the build with `lines` as its error (no panic, no backtrace).
fn fail(lines: &[&str]) {
    for l in lines {
        println!("cargo::error=gpi2-sys: {l}");
    }
}

/// The libraries a static libGPI2 needs: its `GPI2.pc`'s `Libs.private`
/// (`-lrt -pthread` for the Ethernet device, `-libverbs` for InfiniBand),
/// else pthread and rt.
fn private_libs(libdir: &Path) -> Vec<String> {
    let pc = std::fs::read_to_string(libdir.join("pkgconfig/GPI2.pc")).unwrap_or_default();
    let line = pc
        .lines()
        .find_map(|l| l.strip_prefix("Libs.private:"))
        .unwrap_or("-lrt -pthread");
    line.split_whitespace()
        .filter_map(|t| match t {
            "-pthread" => Some("pthread".to_string()),
            t => t.strip_prefix("-l").map(String::from),
        })
        .collect()
}

/// (major, minor) from GPI2_VERSION.h, if present.
fn version(include: &Path) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(include.join("GPI2_VERSION.h")).ok()?;
    let num = |name: &str| -> Option<u32> {
        let line = text.lines().find(|l| l.contains(name))?;
        line.chars()
            .filter(|c| c.is_ascii_digit())
            .collect::<String>()
            .parse()
            .ok()
    };
    Some((num("GASPI_MAJOR_VERSION")?, num("GASPI_MINOR_VERSION")?))
}

fn main() {
    for v in [
        "GPI2_DIR",
        "GPI2_DEBUG",
        "GPI2_LINK",
        "DOCS_RS",
        "PKG_CONFIG_PATH",
    ] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    if std::env::var_os("DOCS_RS").is_some() {
        println!("cargo:rustc-cfg=gpi2_1_6");
        println!("cargo:rustc-env=GPI2_SYS_BIN=");
        return;
    }
    let mut looked = Vec::new();
    let mut found = None;
    if let Some(dir) = std::env::var_os("GPI2_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        found = at_prefix(&dir);
        if found.is_none() {
            return fail(&[
                &format!(
                    "GPI2_DIR={} holds no GPI-2 (no include/GASPI.h with lib64/ or lib/ \
                     libGPI2.so or libGPI2.a)",
                    dir.display()
                ),
                "Point GPI2_DIR at the prefix GPI-2 was installed to (./configure --prefix=DIR), \
                 or unset it to search pkg-config and the usual prefixes.",
            ]);
        }
    }
    if found.is_none() {
        looked.push("pkg-config GPI2 (GPI2.pc on PKG_CONFIG_PATH)".into());
        found = pkg_config();
    }
    if found.is_none() {
        let mut prefixes: Vec<PathBuf> = ["/opt/GPI2", "/opt/gpi2"]
            .iter()
            .map(PathBuf::from)
            .collect();
        if let Some(home) = std::env::var_os("HOME") {
            prefixes.push(PathBuf::from(home).join("GPI2"));
        }
        prefixes.extend(["/usr/local", "/usr"].iter().map(PathBuf::from));
        for p in prefixes {
            looked.push(p.display().to_string());
            if let Some(f) = at_prefix(&p) {
                found = Some(f);
                break;
            }
        }
    }
    let Some(f) = found else {
        let looked = format!("Looked in: {}", looked.join(", "));
        return fail(&[
            "no installed GPI-2 found (this crate never builds it).",
            &looked,
            "Install GPI-2 (needs autoconf, automake, libtool): ./autogen.sh && ./configure \
             --prefix=DIR --with-ethernet && make install; then GPI2_DIR=DIR (or \
             PKG_CONFIG_PATH=DIR/lib64/pkgconfig).",
            "To build documentation without GPI-2, set DOCS_RS=1.",
        ]);
    };
    let debug = std::env::var_os("CARGO_FEATURE_DEBUG").is_some()
        || std::env::var("GPI2_DEBUG").is_ok_and(|v| v == "1");
    let name = if debug { "GPI2-dbg" } else { "GPI2" };
    println!("cargo:rustc-link-search=native={}", f.lib.display());
    let archive = f.lib.join(format!("lib{name}.a"));
    let dylib = std::env::var("GPI2_LINK").is_ok_and(|v| v == "dylib");
    if archive.is_file() && !dylib {
        // Static: nothing to find at run time, for dependents' binaries too
        // (a dependency's link arguments never reach them).
        println!("cargo:rustc-link-lib=static={name}");
        for lib in private_libs(&f.lib) {
            println!("cargo:rustc-link-lib={lib}");
        }
    } else {
        // Shared: this crate's own tests and examples get a run path;
        // dependents read DEP_GPI2_LIBDIR (gaspi does) or LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", f.lib.display());
        println!("cargo:rustc-link-lib=dylib={name}");
    }
    // The install's gaspi_run, for this crate's own tests.
    if let Some(prefix) = f.lib.parent() {
        println!(
            "cargo:rustc-env=GPI2_SYS_BIN={}",
            prefix.join("bin").display()
        );
    }
    // Dependents (the engine) read these as DEP_GPI2_*.
    println!("cargo:include={}", f.include.display());
    println!("cargo:libdir={}", f.lib.display());
    match version(&f.include) {
        Some((1, minor)) if minor >= 6 => println!("cargo:rustc-cfg=gpi2_1_6"),
        Some((1, 5)) => {}
        Some((major, minor)) => println!(
            "cargo:warning=gpi2-sys: GPI-2 {major}.{minor} at {}: bindings are for 1.5 and 1.6",
            f.include.display()
        ),
        None => println!("cargo:warning=gpi2-sys: no GPI2_VERSION.h; assuming GPI-2 1.5"),
    }
}
