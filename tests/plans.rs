//! Snapshot tests of the collectives' plans, to review against Al Ahad et al. 2018:
//! the dissemination schedules of figures 4 (n = 7) and 5 (n = 11), and the
//! allgatherv block table of a small linearly decreasing distribution
//! (algorithm 1, listings 1-3).

use gaspi::plan::{AllgathervPlan, Dissemination, Layout};

#[test]
fn dissemination_schedule_for_7_nodes() {
    insta::assert_snapshot!(Dissemination::new(7).schedule());
}

#[test]
fn dissemination_schedule_for_11_nodes() {
    insta::assert_snapshot!(Dissemination::new(11).schedule());
}

#[test]
fn allgatherv_block_table_linearly_decreasing() {
    // 6 ranks in 2 nodes of 3; m_i = 2c(n-1-i)/(n-1) with c = 5: 10, 8, 6, 4, 2, 0.
    let layout = Layout { ranks: 6, ppn: 3 };
    let counts = [10, 8, 6, 4, 2, 0];
    let mut displs = vec![0; 6];
    for r in 1..6 {
        displs[r] = displs[r - 1] + counts[r - 1];
    }
    let plan = AllgathervPlan::new(layout, &counts, &displs, 3, 65_536);
    insta::assert_snapshot!(plan.table());
}
