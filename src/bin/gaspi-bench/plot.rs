//! `gaspi-bench plot`: an SVG of any CSV gaspi-bench wrote (its `--format
//! csv` rows, or the comparison scripts' files that add columns to them),
//! without Python.
//!
//! One line per (benchmark, implementation, ranks, ranks per node): the
//! median over rows (rounds) of `t_median_us` at each size, every measured
//! point marked. An MPI line (an implementation named `mpi`, or with an
//! `mpi:` part) shares the colour of ours of the same benchmark and job and
//! is dashed with square marks; the lower panel shows ours / MPI at each
//! size both measured. The caption names the statistic, the machine and
//! the date; MPI lines say "N ranks" only (MPI does not see our emulated
//! nodes).

use clap::Parser;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Plot CSV files written by gaspi-bench (`--format csv`) or by the
/// comparison scripts (scripts/compare-*.sh) as an SVG.
#[derive(Parser, Debug)]
#[command(name = "gaspi-bench plot", max_term_width = 100)]
pub struct PlotCli {
    /// CSV files with at least the columns bench, impl, procs, bytes and
    /// t_median_us (lines starting with '#' are skipped).
    #[arg(required = true, value_name = "CSV")]
    pub inputs: Vec<PathBuf>,

    /// Where to write the SVG.
    #[arg(short, long, value_name = "SVG")]
    pub output: PathBuf,

    /// Only these benchmarks (the `bench` column).
    #[arg(long, value_name = "B,C", value_delimiter = ',')]
    pub bench: Option<Vec<String>>,

    /// The title [default: the benchmarks plotted].
    #[arg(long)]
    pub title: Option<String>,

    /// The machine that measured [default: this one's CPU model, cores and
    /// kernel].
    #[arg(long)]
    pub machine: Option<String>,

    /// The date of the measurement [default: today].
    #[arg(long)]
    pub date: Option<String>,

    /// What to call the MPI lines [default: MPI].
    #[arg(long, value_name = "NAME", default_value = "MPI")]
    pub mpi_label: String,
}

/// Which line a row belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Line {
    bench: String,
    procs: u32,
    ppn: u32,
    imp: String,
}

impl Line {
    fn is_mpi(&self) -> bool {
        self.imp.split(':').any(|p| p == "mpi")
    }

    /// The benchmark and job, shared by ours and MPI's (one colour).
    fn job(&self) -> (String, u32, u32) {
        (self.bench.clone(), self.procs, self.ppn)
    }
}

/// Median of each line at each size.
type Medians = BTreeMap<Line, BTreeMap<u64, f64>>;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Read the rows of `path` into `samples`.
fn read(
    path: &Path,
    only: Option<&[String]>,
    samples: &mut BTreeMap<Line, BTreeMap<u64, Vec<f64>>>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(format!("{}: no header", path.display()));
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |name: &str| cols.iter().position(|c| *c == name);
    let need =
        |name: &str| col(name).ok_or_else(|| format!("{}: no column {name}", path.display()));
    let (bench, imp, procs, bytes, t) = (
        need("bench")?,
        need("impl")?,
        need("procs")?,
        need("bytes")?,
        need("t_median_us")?,
    );
    // gaspi-bench's own rows say ppn; the comparison scripts' ppn_bench.
    let ppn = col("ppn_bench").or_else(|| col("ppn"));
    let verified = col("verified");
    for (no, l) in lines {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let bad = || format!("{}:{}: malformed row", path.display(), no + 1);
        if f.len() != cols.len() {
            return Err(bad());
        }
        if verified.is_some_and(|v| f[v] != "true") {
            continue; // a benchmark that did not verify its data
        }
        if only.is_some_and(|o| !o.iter().any(|b| b == f[bench])) {
            continue;
        }
        let procs: u32 = f[procs].parse().map_err(|_| bad())?;
        let line = Line {
            bench: f[bench].to_string(),
            procs,
            ppn: ppn.map_or(Ok(procs), |p| f[p].parse()).map_err(|_| bad())?,
            imp: f[imp].to_string(),
        };
        let bytes: u64 = f[bytes].parse().map_err(|_| bad())?;
        let t: f64 = f[t].parse().map_err(|_| bad())?;
        if !(t.is_finite() && t > 0.0) {
            return Err(bad());
        }
        samples
            .entry(line)
            .or_default()
            .entry(bytes)
            .or_default()
            .push(t);
    }
    Ok(())
}

/// Today as YYYY-MM-DD (UTC), from the days since 1970 (Howard Hinnant's
/// civil-from-days algorithm).
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// A size for an axis label: 8, 4K, 2M.
fn size_label(b: f64) -> String {
    let b = b.round() as u64;
    match b {
        _ if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        _ if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        _ if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        _ => b.to_string(),
    }
}

/// What a line is called in the legend.
fn legend(l: &Line, mpi_label: &str) -> String {
    if l.is_mpi() && l.ppn < l.procs {
        // MPI does not see our nodes, but ran in processes whose other
        // half (ours) did: runs of one job size apart.
        format!(
            "{mpi_label} ({}), {}, {} ranks (beside ours in nodes of {})",
            l.imp, l.bench, l.procs, l.ppn
        )
    } else if l.is_mpi() {
        format!("{mpi_label} ({}), {}, {} ranks", l.imp, l.bench, l.procs)
    } else if l.ppn < l.procs {
        format!(
            "ours ({}), {}, {} ranks in nodes of {}",
            l.imp, l.bench, l.procs, l.ppn
        )
    } else {
        format!("ours ({}), {}, {} ranks", l.imp, l.bench, l.procs)
    }
}

/// Read the inputs and write the plot; returns the number of lines.
pub fn plot(a: &PlotCli) -> Result<usize, String> {
    let mut samples = BTreeMap::new();
    for p in &a.inputs {
        read(p, a.bench.as_deref(), &mut samples)?;
    }
    let medians: Medians = samples
        .into_iter()
        .map(|(l, by)| {
            (
                l,
                by.into_iter()
                    .map(|(b, mut v)| (b, median(&mut v)))
                    .collect(),
            )
        })
        .collect();
    if medians.is_empty() {
        return Err("no verified rows to plot".into());
    }
    let ratios = ratios(&medians);
    draw(a, &medians, &ratios).map_err(|e| format!("{}: {e}", a.output.display()))?;
    Ok(medians.len())
}

/// Ours over MPI's at each size, per line of ours that has an MPI twin.
fn ratios(medians: &Medians) -> BTreeMap<&Line, Vec<(f64, f64)>> {
    let mut ratios: BTreeMap<&Line, Vec<(f64, f64)>> = BTreeMap::new();
    for (l, pts) in medians.iter().filter(|(l, _)| !l.is_mpi()) {
        // MPI's line of the same benchmark and job, from the same run
        // (ranks per node) where there is one, that shares the most parts
        // of the implementation's name (a fence pattern, a lock mode).
        let parts = |i: &str| {
            i.split(':')
                .filter(|p| *p != "mpi")
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let ours = parts(&l.imp);
        let twin = medians
            .iter()
            .filter(|(m, _)| m.is_mpi() && m.bench == l.bench && m.procs == l.procs)
            .max_by_key(|(m, _)| {
                let shared = parts(&m.imp).iter().filter(|p| ours.contains(p)).count();
                (m.ppn == l.ppn, shared)
            });
        if let Some((_, theirs)) = twin {
            let r: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|(b, t)| theirs.get(b).map(|m| (*b as f64, t / m)))
                .collect();
            if !r.is_empty() {
                ratios.insert(l, r);
            }
        }
    }
    ratios
}

fn draw(
    a: &PlotCli,
    medians: &Medians,
    ratios: &BTreeMap<&Line, Vec<(f64, f64)>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let all = || medians.values().flat_map(|m| m.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (b, t) in all() {
        let b = (*b).max(1) as f64;
        (x0, x1, y0, y1) = (x0.min(b), x1.max(b), y0.min(*t), y1.max(*t));
    }
    let (x0, x1) = (x0 / 1.5, x1 * 1.5);
    let (y0, y1) = (y0 / 1.5, y1 * 1.5);

    let height = if ratios.is_empty() { 560 } else { 760 };
    let root = SVGBackend::new(&a.output, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(60);
    let benches: Vec<&str> = {
        let mut b: Vec<&str> = medians.keys().map(|l| l.bench.as_str()).collect();
        b.dedup();
        b
    };
    let title = a.title.clone().unwrap_or_else(|| benches.join(", "));
    let machine = a.machine.clone().unwrap_or_else(crate::printer::machine);
    let date = a.date.clone().unwrap_or_else(today);
    head.draw(&Text::new(title, (20, 8), ("sans-serif", 22).into_font()))?;
    head.draw(&Text::new(
        format!(
            "time per call: median over rounds of the median over batches [us]; {machine}; {date}"
        ),
        (20, 36),
        ("sans-serif", 14).into_font(),
    ))?;
    let (top, bottom) = if ratios.is_empty() {
        (body, None)
    } else {
        let (t, b) = body.split_vertically(height - 60 - 220);
        (t, Some(b))
    };

    // One colour per benchmark and job, ours and MPI's alike.
    let mut jobs: Vec<(String, u32, u32)> = medians.keys().map(Line::job).collect();
    jobs.dedup();
    let colour = |l: &Line| {
        let i = jobs.iter().position(|j| *j == l.job()).unwrap_or(0);
        Palette99::pick(i).to_rgba()
    };

    let mut chart = ChartBuilder::on(&top)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale().base(2.0), (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("message size [bytes]")
        .y_desc("time [us]")
        .x_label_formatter(&|b| size_label(*b))
        .draw()?;
    for (l, pts) in medians {
        let c = colour(l);
        let xy: Vec<(f64, f64)> = pts.iter().map(|(b, t)| ((*b).max(1) as f64, *t)).collect();
        let name = legend(l, &a.mpi_label);
        if l.is_mpi() {
            chart
                .draw_series(DashedLineSeries::new(xy.clone(), 6, 4, c.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(1))
                });
            chart.draw_series(
                xy.iter()
                    .map(|&(x, y)| TriangleMarker::new((x, y), 5, c.filled())),
            )?;
        } else {
            chart
                .draw_series(LineSeries::new(xy.clone(), c.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
                });
            chart.draw_series(xy.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;

    if let Some(bottom) = bottom {
        let (mut r0, mut r1) = (1.0f64, 1.0f64);
        for (_, r) in ratios.values().flat_map(|v| v.iter()) {
            (r0, r1) = (r0.min(*r), r1.max(*r));
        }
        let mut rc = ChartBuilder::on(&bottom)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1).log_scale().base(2.0), r0 * 0.9..r1 * 1.1)?;
        rc.configure_mesh()
            .x_desc("message size [bytes]")
            .y_desc(format!("ours / {} (< 1: ours faster)", a.mpi_label))
            .x_label_formatter(&|b| size_label(*b))
            .draw()?;
        rc.draw_series(LineSeries::new(
            vec![(x0, 1.0), (x1, 1.0)],
            BLACK.stroke_width(1),
        ))?;
        for (l, r) in ratios {
            let c = colour(l);
            rc.draw_series(LineSeries::new(r.clone(), c.stroke_width(2)))?;
            rc.draw_series(r.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_sizes_read_as_people_write_them() {
        let d = today();
        assert_eq!((d.len(), &d[4..5], &d[7..8]), (10, "-", "-"));
        assert!(d.as_str() > "2024-01-01");
        assert_eq!(size_label(8.0), "8");
        assert_eq!(size_label(4096.0), "4K");
        assert_eq!(size_label(3.0 * 1048576.0), "3M");
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    /// Each line of ours is compared with MPI's line from the same run
    /// (same ranks per node) where there is one, else with another of the
    /// same job size.
    #[test]
    fn ours_is_compared_with_mpi_from_the_same_run() {
        let line = |imp: &str, ppn| Line {
            bench: "stencil-1d".into(),
            procs: 2,
            ppn,
            imp: imp.into(),
        };
        let at = |t: f64| BTreeMap::from([(4096u64, t)]);
        let medians: Medians = BTreeMap::from([
            (line("node", 1), at(2.0)),
            (line("node", 2), at(3.0)),
            (line("mpi", 1), at(4.0)),
            (line("mpi", 2), at(12.0)),
            (
                Line {
                    procs: 4,
                    ..line("node", 2)
                },
                at(5.0),
            ),
            (
                Line {
                    procs: 4,
                    ..line("mpi", 1)
                },
                at(10.0),
            ),
        ]);
        let r = ratios(&medians);
        assert_eq!(r[&line("node", 1)], vec![(4096.0, 0.5)]);
        assert_eq!(r[&line("node", 2)], vec![(4096.0, 0.25)]);
        assert_eq!(
            r[&Line {
                procs: 4,
                ..line("node", 2)
            }],
            vec![(4096.0, 0.5)]
        );
        assert_eq!(r.len(), 3);
        assert_eq!(
            legend(&line("mpi", 2), "MPICH"),
            "MPICH (mpi), stencil-1d, 2 ranks"
        );
        assert_eq!(
            legend(&line("mpi", 1), "MPICH"),
            "MPICH (mpi), stencil-1d, 2 ranks (beside ours in nodes of 1)"
        );
    }

    #[test]
    fn a_csv_becomes_an_svg_with_a_ratio_panel() {
        let dir = std::env::temp_dir().join(format!("gaspi-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("rows.csv");
        std::fs::write(
            &csv,
            "# a comment\n\
             bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified,vs_mpi\n\
             allreduce,auto,4,2,8,10,1.0,1.5,2.0,0.0,true,0.5\n\
             allreduce,auto,4,2,64,10,1.0,2.0,2.0,0.0,true,0.5\n\
             allreduce,mpi,4,2,8,10,1.0,3.0,4.0,0.0,true,\n\
             allreduce,mpi,4,2,64,10,1.0,4.0,4.0,0.0,true,\n\
             allreduce,auto,4,2,128,10,1.0,9.0,9.0,0.0,false,\n",
        )
        .unwrap();
        let out = dir.join("p.svg");
        let a = PlotCli::try_parse_from([
            "plot",
            csv.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--machine",
            "test machine",
            "--date",
            "2026-01-02",
            "--mpi-label",
            "Intel MPI",
        ])
        .unwrap();
        assert_eq!(plot(&a).unwrap(), 2);
        let svg = std::fs::read_to_string(&out).unwrap();
        for text in [
            "test machine",
            "2026-01-02",
            "median over rounds",
            "ours (auto), allreduce, 4 ranks in nodes of 2",
            "Intel MPI (mpi), allreduce, 4 ranks",
            "ours / Intel MPI",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // A file without the columns is refused.
        std::fs::write(&csv, "bench,impl\nallreduce\n").unwrap();
        assert!(plot(&a).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
