//! Self-launching programs: `prog -n 4` started by hand runs itself on 4
//! local ranks, as `gaspi-run -n 4 prog` would (Lamellar's and MPI's
//! singleton-start convenience), so that `cargo run --example ring -- -n 4`
//! just works.

use super::Launch;
use crate::env;
use std::ffi::OsString;

/// Ranks, ranks per node, and the arguments left for the program.
type Layout = (usize, Option<usize>, Vec<OsString>);

/// What the first arguments ask for: `-n N` (or `-np N`, `--np N`) and
/// optionally `--ppn P`, and the arguments left for the program; `None`
/// when they ask for no layout, an error for a layout option without a
/// positive number.
fn layout(args: &[OsString]) -> Result<Option<Layout>, String> {
    let text = |i: usize| args.get(i).and_then(|a| a.to_str());
    let number = |i: usize| {
        text(i + 1)
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{} wants a positive number", text(i).unwrap_or_default()))
    };
    let (mut ranks, mut ppn, mut i) = (None, None, 0);
    loop {
        match text(i) {
            Some("-n" | "-np" | "--np") if ranks.is_none() => ranks = Some(number(i)?),
            Some("--ppn" | "-ppn") if ppn.is_none() => ppn = Some(number(i)?),
            _ => break,
        }
        i += 2;
    }
    match ranks {
        Some(n) => Ok(Some((n, ppn, args[i..].to_vec()))),
        None if ppn.is_some() => Err("--ppn without -n N".into()),
        None => Ok(None),
    }
}

/// Run this program on the ranks its command line asks for, then exit
/// with the job's status; return at once in a rank (started by
/// `gaspi-run`, GPI-2's `gaspi_run` or `mpirun`: `GASPI_RANK` or an MPI
/// rank variable is set) and when the first arguments are not `-n N
/// [--ppn P]` (the program then runs as a job of one rank). A layout
/// option without a positive number ends the program with status 125.
///
/// Call it first in `main`; the ranks get the arguments after the layout.
/// The launch is `gaspi-run`'s: ranks bound to CPUs, failures reported,
/// signals forwarded, nothing left behind.
///
/// ```no_run
/// fn main() -> Result<(), gaspi::Error> {
///     gaspi::launcher::launch_self(); // `prog -n 4 ARGS` runs 4 ranks of `prog ARGS`
///     let ctx = gaspi::Context::init(gaspi::Config::default())?;
///     println!("rank {} of {}", ctx.rank(), ctx.num_ranks());
///     Ok(())
/// }
/// ```
pub fn launch_self() {
    let in_a_job = [
        env::RANK,
        "PMI_RANK",
        "OMPI_COMM_WORLD_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some());
    if in_a_job {
        return;
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (ranks, ppn, rest) = match layout(&args) {
        Ok(Some(l)) => l,
        Ok(None) => return,
        Err(e) => {
            eprintln!("gaspi: {e} (usage: PROGRAM [-n N [--ppn P]] [ARGS...])");
            std::process::exit(super::LAUNCH_FAILED.into());
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("gaspi: cannot find this program to start its ranks: {e}");
            std::process::exit(super::LAUNCH_FAILED.into());
        }
    };
    let mut launch = Launch::new(exe, ranks)
        .args(rest)
        .verbose(true)
        .forward_signals(true);
    if let Some(p) = ppn {
        launch = launch.ppn(p);
    }
    match launch.run() {
        Ok(report) => std::process::exit(report.exit_code()),
        Err(e) => {
            eprintln!("gaspi: starting {ranks} ranks: {e}");
            std::process::exit(super::LAUNCH_FAILED.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_layout_comes_first_and_the_rest_is_the_programs() {
        assert_eq!(
            layout(&os(&["-n", "4", "x"])),
            Ok(Some((4, None, os(&["x"]))))
        );
        assert_eq!(
            layout(&os(&["--ppn", "2", "-np", "4"])),
            Ok(Some((4, Some(2), vec![])))
        );
        assert_eq!(layout(&os(&["x", "-n", "4"])), Ok(None));
        assert_eq!(layout(&os(&[])), Ok(None));
        for bad in [&["-n", "0"][..], &["-n", "four"], &["-n"], &["--ppn", "2"]] {
            assert!(layout(&os(bad)).is_err(), "{bad:?}");
        }
    }
}
