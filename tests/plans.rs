//! Snapshot tests of the collectives' plans, to review against Al Ahad et al. 2018:
//! the dissemination schedules of figures 4 (n = 7) and 5 (n = 11), and the
//! allgatherv block table of a small linearly decreasing distribution
//! (algorithm 1, listings 1-3); and the plan of a sparse node-aggregated
//! alltoallv (the future work of Al Ahad et al. 2018, section V).

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

#[test]
fn alltoallv_plan_of_a_sparse_exchange() {
    // 5 ranks in nodes of 2, 2 and 1: every rank sends 3 elements to the
    // next, and rank 0 sends 7 to rank 4; chunks of at most 4 elements.
    // Node 1 sends nothing to node 0, so neither a chunk nor a credit.
    let layout = Layout { ranks: 5, ppn: 2 };
    let mut counts = [0; 25];
    for s in 0..5 {
        counts[s * 5 + (s + 1) % 5] = 3;
    }
    counts[4] = 7;
    let plan = gaspi::plan::AlltoallvPlan::new(layout, &counts, 8, 4, 1024).unwrap();
    assert_eq!(plan.senders_to(0).collect::<Vec<_>>(), [2]);
    insta::assert_snapshot!(plan.table());
}
