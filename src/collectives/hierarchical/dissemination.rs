//! The dissemination with partial reductions between nodes (Al Ahad et al.
//! 2018, section III; the schedule is [`Dissemination`](crate::plan::Dissemination)).
//! Each participant sends the value it holds after step `k` to `p + 2^k`
//! and, if `n` has bit `j = k`, out of band to `p + D_j`; it combines what
//! it receives in a fixed order: `value(k + 1) = received(k) op value(k)`,
//! then each partial folded in from the left.

use super::call_plan::CallPlan;
use super::kernels::{fold_from, tag};
use super::node_reduce::NodeReduce;
use crate::context::Context;
use crate::error::Result;
use crate::types::{Deadline, Notification};
use bytemuck::Pod;

impl NodeReduce {
    /// Id of dissemination slot `slot` of instance `inst` in a call of
    /// parity `parity`.
    fn recv_id(&self, parity: usize, slot: usize, inst: usize) -> u32 {
        let slots = self.dis.steps as usize + self.dis.partials.len();
        ((parity * slots + slot) * self.slots + inst) as u32
    }

    /// Byte offset of dissemination slot `slot` (parity `parity`).
    fn recv_at(&self, parity: usize, slot: usize) -> usize {
        let slots = self.dis.steps as usize + self.dis.partials.len();
        self.areas.recv + (parity * slots + slot) * self.areas.cols
    }

    /// Instance `plan.mine[idx]` by dissemination, from action `cursor`
    /// on. Action 0: the node reduction and the sends of step 0; action
    /// `k + 1`: receive step `k`, combine, send; then one action per
    /// partial received.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn disseminate<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        idx: usize,
        parity: usize,
        cursor: &mut usize,
        (send, f): (&[T], &F),
        deadline: Deadline,
    ) -> Result<()> {
        let i = plan.mine[idx];
        let inst = &plan.instances[i];
        let elem = plan.elem;
        let n = inst.elems.len();
        let bytes = n * elem;
        let steps = self.dis.steps as usize;
        let nodes = self.layout.nodes();
        let p = ctx.node();
        let tag = tag(self.calls);
        let result = self.areas.result + inst.col;
        // The value after step `k` (`k < steps`) lives in run[k]; the
        // final value in the result column.
        let value = |k: usize| {
            if k < steps {
                self.areas.run + k * self.areas.cols + inst.col
            } else {
                result
            }
        };
        let send_after = |k: usize| -> Result<()> {
            let from = value(k);
            if k < steps {
                let to = (p + (1 << k)) % nodes;
                let at = self.recv_at(parity, k) + inst.col;
                self.post(
                    ctx,
                    self.owner(to, i),
                    (from, at, bytes),
                    Notification::new(self.recv_id(parity, k, i), tag),
                    deadline,
                )?;
            }
            for (q, &(j, d)) in self.dis.partials.iter().enumerate() {
                if j as usize == k {
                    let to = (p + d) % nodes;
                    let slot = steps + q;
                    let at = self.recv_at(parity, slot) + inst.col;
                    self.post(
                        ctx,
                        self.owner(to, i),
                        (from, at, bytes),
                        Notification::new(self.recv_id(parity, slot, i), tag),
                        deadline,
                    )?;
                }
            }
            Ok(())
        };
        let actions = 1 + steps + self.dis.partials.len();
        while *cursor < actions {
            let a = *cursor;
            if a == 0 {
                // SAFETY: value(0) is this instance's column of run[0] (or,
                // on one node, of the result), written by this rank only and
                // sent only after this write.
                let out = unsafe { self.mem.write::<T>(value(0), n) };
                self.reduce_node(ctx, inst, out, send, f);
                send_after(0)?;
            } else {
                let slot = a - 1;
                let v = self.await_id(ctx, self.recv_id(parity, slot, i), deadline)?;
                debug_assert_eq!(v, tag, "dissemination message of another call");
                let recv = self.recv_at(parity, slot) + inst.col;
                if n > 0 {
                    // SAFETY: the receive slot was written by its sender
                    // before the notification just claimed and is not
                    // written again before the call two ahead; `value(k)`
                    // columns are this instance's, written by this rank
                    // only, and the one written here is not being sent
                    // (it is sent after this write, by `send_after`).
                    unsafe {
                        let r = self.mem.read::<T>(recv, n);
                        if slot < steps {
                            let prev = self.mem.read::<T>(value(slot), n);
                            let out = self.mem.write::<T>(value(slot + 1), n);
                            for ((o, a), b) in out.iter_mut().zip(r).zip(prev) {
                                *o = f(a, b);
                            }
                        } else {
                            fold_from(self.mem.write::<T>(result, n), r, f);
                        }
                    }
                }
                if slot < steps {
                    send_after(slot + 1)?;
                }
            }
            *cursor += 1;
        }
        Ok(())
    }
}
