//! Measurement rows, their statistics, and the two output formats.

use std::fmt::Write as _;

/// One line of results: one benchmark, one implementation, one size.
#[derive(Clone, Debug)]
pub struct Row {
    pub bench: &'static str,
    pub imp: String,
    pub procs: usize,
    pub ppn: usize,
    pub bytes: usize,
    /// Operations measured in total.
    pub reps: usize,
    /// Time per operation of each sample (a batch of operations), in us.
    pub samples: Vec<f64>,
    /// Bytes moved per operation for the bandwidth column (0: none).
    pub bw_bytes: usize,
    pub verified: bool,
    /// Under `mpirun` (feature `mpi`): this row's median over MPI's for
    /// the same operation and size, measured alternately.
    pub vs_mpi: Option<f64>,
}

impl Row {
    /// Report bandwidth: every operation moved `bytes`.
    pub fn with_bandwidth(mut self) -> Row {
        self.bw_bytes = self.bytes;
        self
    }

    fn sorted(&self) -> Vec<f64> {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        s
    }

    pub fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }

    pub fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(f64::NAN)
    }

    /// Median of the samples.
    pub fn median(&self) -> f64 {
        let s = self.sorted();
        match s.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        }
    }

    pub fn avg(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len().max(1) as f64
    }

    /// MB/s (10^6 bytes per second) at the median time, 0 without a
    /// bandwidth.
    pub fn mbps(&self) -> f64 {
        if self.bw_bytes == 0 {
            0.0
        } else {
            self.bw_bytes as f64 / self.median()
        }
    }
}

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
}

/// The CSV header (exactly these columns).
/// `vs_mpi` (ours / MPI's median) is empty unless run under `mpirun`.
pub const CSV_HEADER: &str =
    "bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified,vs_mpi";

pub fn csv_line(r: &Row) -> String {
    format!(
        "{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.1},{},{}",
        r.bench,
        r.imp,
        r.procs,
        r.ppn,
        r.bytes,
        r.reps,
        r.min(),
        r.median(),
        r.max(),
        r.mbps(),
        r.verified,
        r.vs_mpi.map_or(String::new(), |v| format!("{v:.3}"))
    )
}

/// The table's column names. They are not IMB's `t_min[usec]` etc.,
/// which are statistics over processes: ours are statistics over the
/// batches rank 0 timed (the time per operation of each batch), and the
/// bandwidth is computed from the median batch.
pub const TABLE_COLUMNS: [&str; 6] = [
    "batch_min[us]",
    "batch_max[us]",
    "batch_avg[us]",
    "median[us]",
    "MB/s@median",
    "impl",
];

/// An IMB-like table of `rows` (all of one benchmark), columns as
/// [`TABLE_COLUMNS`] says.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let with_bw = rows.iter().any(|r| r.bw_bytes > 0);
    let with_mpi = rows.iter().any(|r| r.vs_mpi.is_some());
    let _ = write!(
        s,
        "{:>12} {:>12} {:>14} {:>14} {:>14} {:>14}",
        "#bytes",
        "#repetitions",
        TABLE_COLUMNS[0],
        TABLE_COLUMNS[1],
        TABLE_COLUMNS[2],
        TABLE_COLUMNS[3]
    );
    if with_bw {
        let _ = write!(s, " {:>12}", TABLE_COLUMNS[4]);
    }
    let _ = write!(s, " {:>12} {:>9}", TABLE_COLUMNS[5], "verified");
    if with_mpi {
        let _ = write!(s, " {:>8}", "ours/mpi");
    }
    let _ = writeln!(s);
    for r in rows {
        let _ = write!(
            s,
            "{:>12} {:>12} {:>14.3} {:>14.3} {:>14.3} {:>14.3}",
            r.bytes,
            r.reps,
            r.min(),
            r.max(),
            r.avg(),
            r.median()
        );
        if with_bw {
            let _ = write!(s, " {:>12.1}", r.mbps());
        }
        let _ = write!(
            s,
            " {:>8} {:>9}",
            r.imp,
            if r.verified { "yes" } else { "NO" }
        );
        if let Some(v) = r.vs_mpi {
            let _ = write!(s, " {v:>8.3}");
        }
        let _ = writeln!(s);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(samples: Vec<f64>) -> Row {
        Row {
            bench: "b",
            imp: "gaspi".into(),
            procs: 2,
            ppn: 2,
            bytes: 1000,
            reps: 10,
            samples,
            bw_bytes: 1000,
            verified: true,
            vs_mpi: None,
        }
    }

    #[test]
    fn statistics() {
        let r = row(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!(
            (r.min(), r.max(), r.median(), r.avg()),
            (1.0, 10.0, 2.5, 4.0)
        );
        assert_eq!(r.mbps(), 400.0);
        assert_eq!(row(vec![5.0, 1.0, 3.0]).median(), 3.0);
    }

    #[test]
    fn csv_has_the_required_columns() {
        let line = csv_line(&row(vec![1.0]));
        assert_eq!(line.split(',').count(), CSV_HEADER.split(',').count());
        assert!(line.starts_with("b,gaspi,2,2,1000,10,1.000,1.000,1.000,1000.0,true"));
    }
}
