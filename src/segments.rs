//! Segments: remotely accessible memory (`gaspi_segment_*`).
//!
//! A segment is identified by a small id, per rank: segment 0 of rank 3 and
//! segment 0 of rank 5 are different memory of possibly different sizes.
//! [`Context::segment_create`] allocates one on every member of a group and
//! registers it with all of them; [`Context::segment_alloc`] plus
//! [`Context::segment_register`] do the same step by step; bind/use turn
//! memory the program already has into a segment.
//!
//! Each segment carries its table of
//! [`Config::notification_num`](crate::Config::notification_num)
//! notifications.
//!
//! Local access goes through a typed [`SegmentView`]: copies and volatile
//! element access are safe; borrowing the memory as a Rust slice is
//! `unsafe`, because other ranks may write it at any time.

use crate::config::{RESERVED_SEGMENT, in_internal};
use crate::context::Context;
use crate::context::groups::CreateStage;
use crate::engine::segment::{SegmentObject, Shape};
use crate::engine::shm::page_size;
use crate::error::{Error, Result};
use crate::types::{Alloc, GroupId, Rank, SegmentId, Timeout};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// The alignment `segment_bind` needs for memory inside another segment
/// (a cache line: every element type's and every atomic word's).
const INSIDE_ALIGN: usize = 64;

/// The alignment `segment_bind` needs for other memory that is not whole
/// pages (kept private): an atomic word's, so that every 8-byte multiple
/// offset is an aligned word (`malloc` and `Vec<u64>` give it).
const PRIVATE_ALIGN: usize = 8;

impl Context {
    pub(crate) fn check_segment_id(&self, segment: SegmentId) -> Result<()> {
        let reserved = segment == RESERVED_SEGMENT && in_internal();
        if (segment as u32) < self.config.segment_max || reserved {
            Ok(())
        } else {
            Err(Error::InvalidSegmentId {
                segment,
                max: self.config.segment_max,
            })
        }
    }

    /// The shape of a new segment of `size` bytes on this rank.
    pub(crate) fn shape(&self, size: usize) -> Shape {
        Shape {
            size,
            notification_num: self.config.notification_num,
            nranks: self.engine.nranks(),
            counting: false,
        }
    }

    pub(crate) fn check_segment_size(size: usize) -> Result<()> {
        if size == 0 {
            return Err(Error::InvalidArgument(
                "a segment needs at least one byte".into(),
            ));
        }
        Ok(())
    }

    /// Allocate segment `segment` of `size` bytes on this rank
    /// (`gaspi_segment_alloc`). Only this rank can access it until it is
    /// registered with others.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(4, 1 << 20, gaspi::Alloc::Initialized)?;
    /// assert_eq!(ctx.segment_size(4, ctx.rank())?, 1 << 20);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_alloc(&self, segment: SegmentId, size: usize, _alloc: Alloc) -> Result<()> {
        self.check_segment_id(segment)?;
        Self::check_segment_size(size)?;
        let shape = self.shape(size);
        self.engine
            .add_segment(segment, size, |key| SegmentObject::create(key, &shape))
    }

    /// Let `rank` access this rank's segment `segment`
    /// (`gaspi_segment_register`). Returns at once on the native engine.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// // Allocate, then open to every rank: segment_create without the barrier.
    /// ctx.segment_alloc(2, 4096, gaspi::Alloc::Initialized)?;
    /// for r in 0..ctx.num_ranks() {
    ///     ctx.segment_register(2, r, gaspi::Timeout::Block)?;
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_register(&self, segment: SegmentId, rank: Rank, timeout: Timeout) -> Result<()> {
        self.check_segment_id(segment)?;
        self.engine.check_rank(rank)?;
        self.engine.register(segment, rank, timeout)
    }

    /// Collectively create segment `segment` of `size` bytes on every member
    /// of `group`, registered with all of them (`gaspi_segment_create`:
    /// alloc, register, barrier). After it returns every member can access
    /// every other member's segment `segment`.
    ///
    /// One barrier more than GPI-2's comes between the alloc and the
    /// registration: no member can reach the new segment before every
    /// member has come, so what another member still does with an earlier
    /// segment of this id (a collective call it gave up and has not left
    /// yet) cannot land in the new one.
    ///
    /// If a barrier times out, call it again with the same arguments to
    /// keep waiting. Or give up: [`Context::segment_delete`] abandons the
    /// call, and a later `segment_create` of that id starts afresh. The
    /// abandoned call's arrival at a barrier still counts (a barrier cannot
    /// take an arrival back, in GPI-2 neither): abandoned in the closing
    /// barrier, it may let the other members return while this rank makes
    /// the segment anew, so call [`Context::barrier`] once more before they
    /// use it.
    ///
    /// ```
    /// use gaspi::{Alloc, Context, Config, GroupId, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_create(0, 4096, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
    /// assert_eq!(ctx.segment_list(), vec![0]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_create(
        &self,
        segment: SegmentId,
        size: usize,
        group: GroupId,
        timeout: Timeout,
        alloc: Alloc,
    ) -> Result<()> {
        let members = self.committed_members(group)?;
        self.collective_segment(segment, group, &members, timeout, || {
            self.segment_alloc(segment, size, alloc)
        })
    }

    /// Make, barrier, register, barrier; a retry after a timeout resumes
    /// the barrier that timed out instead of failing on the existing
    /// segment.
    ///
    /// The first barrier keeps what other members still do with an earlier
    /// segment of this id (a collective call they gave up after a timeout
    /// and have not yet left, a segment they are deleting) out of the new
    /// one: a member reaches it only once it has left those, and nobody can
    /// write to the new segment before it is registered with them.
    pub(crate) fn collective_segment(
        &self,
        segment: SegmentId,
        group: GroupId,
        members: &[Rank],
        timeout: Timeout,
        make: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.check_segment_id(segment)?;
        let deadline = timeout.deadline();
        // A barrier of the creation; a timeout leaves it to resume at `stage`.
        let barrier = |stage| match self.barrier(group, deadline.timeout()) {
            Err(e) if e.is_timeout() => {
                self.groups.set_pending_create(segment, group, stage);
                Err(e)
            }
            r => r,
        };
        let stage = match self.groups.take_pending_create(segment, group) {
            Some(stage) => stage,
            None => {
                make()?;
                CreateStage::Made
            }
        };
        if stage == CreateStage::Made {
            barrier(CreateStage::Made)?;
            for &m in members {
                self.segment_register(segment, m, deadline.timeout())?;
            }
        }
        barrier(CreateStage::Registered)
    }

    /// Make `size` bytes at `pointer` segment `segment` of this rank
    /// (`gaspi_segment_bind`).
    ///
    /// The memory keeps its address and content. Which ranks reach it
    /// depends on where it lies:
    ///
    /// - **Whole pages** (address and size multiples of the page size:
    ///   allocate with a 4096-byte alignment and round the size up): its
    ///   pages are replaced in place by shared memory that other ranks can
    ///   map, so every rank reaches it as a segment of
    ///   [`Context::segment_alloc`]. `segment_delete` turns them back into
    ///   private memory, content preserved.
    /// - **Inside another segment of this rank** (GPI-2's sub-segments:
    ///   parts of a segment bound as segments of their own): not replaced;
    ///   the new segment is that memory, so every rank reaches the same
    ///   bytes through either segment, each with its own notifications.
    ///   Such a range needs only to start 64-byte aligned and lie inside
    ///   the one segment; it keeps that memory (and the other segment's
    ///   memory shared) until it is deleted itself, even if the other
    ///   segment is deleted first.
    /// - **Any other memory** (a `Vec`'s buffer, a `malloc`ed one; 8-byte
    ///   aligned): it stays this process's private memory, since rebinding
    ///   its first and last pages would take their other contents along.
    ///   This rank uses the segment in every role (source of its writes,
    ///   destination of its reads, its own atomics and views); other ranks
    ///   may notify it, but their writes, reads and atomics on its data fail
    ///   with [`Error::SegmentPrivate`]. Only ranks of other hosts on the
    ///   MPI and GPI-2 engines reach its data, through MPI or GPI-2, as
    ///   they reach every segment.
    ///
    /// Memory that overlaps a segment without lying inside it, or lies in a
    /// window, is refused with [`Error::InvalidArgument`], as is a null or
    /// not 8-byte aligned `pointer`.
    ///
    /// # Safety
    /// The memory must be owned by the caller, valid for reads and writes
    /// of `size` bytes, and stay allocated until the segment, every segment
    /// bound inside it, and every view of them ([`Context::segment`]) are
    /// gone. Whole pages must moreover be heap or anonymous memory, not
    /// used by other threads during the call (their pages are replaced).
    /// On the GPI-2 engine, across hosts, a write another rank posted just
    /// before the deletion may still land in the memory after
    /// `segment_delete` returned (GPI-2's device writes unchecked): free it
    /// only once no rank of another host can still write to it (after a
    /// barrier with them).
    ///
    /// Shared, in whole pages:
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let layout = std::alloc::Layout::from_size_align(8192, 4096).unwrap();
    /// let mem = unsafe { std::alloc::alloc_zeroed(layout) };
    /// unsafe { mem.write(42) };
    /// unsafe { ctx.segment_bind(1, mem, 8192)? };
    /// assert_eq!(ctx.segment_ptr(1)?, mem);
    /// assert_eq!(ctx.segment::<u8>(1)?.get(0), 42);
    /// ctx.segment_delete(1)?;
    /// unsafe { std::alloc::dealloc(mem, layout) };
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    ///
    /// Private, in a `Vec`: this rank writes from it to others.
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let mut buf = vec![7u64; 100];
    /// unsafe { ctx.segment_bind(2, buf.as_mut_ptr().cast(), 800)? };
    /// ctx.segment_alloc(3, 800, Alloc::Initialized)?;
    /// ctx.write(Local::new(2, 0), Remote::new(ctx.rank(), 3, 0), 800, 0, Timeout::Block)?;
    /// ctx.wait(0, Timeout::Block)?;
    /// assert_eq!(ctx.segment::<u64>(3)?.get(99), 7);
    /// ctx.segment_delete(2)?;
    /// drop(buf);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub unsafe fn segment_bind(
        &self,
        segment: SegmentId,
        pointer: *mut u8,
        size: usize,
    ) -> Result<()> {
        self.check_segment_id(segment)?;
        Self::check_segment_size(size)?;
        let shape = self.shape(size);
        if !pointer.is_null() {
            if let Some((source, offset)) = self.engine.segment_around(pointer, size)? {
                if pointer as usize % INSIDE_ALIGN != 0 {
                    return Err(Error::InvalidArgument(format!(
                        "segment_bind inside another segment needs memory aligned to \
                         {INSIDE_ALIGN} bytes (got {pointer:p})"
                    )));
                }
                return self.engine.add_segment(segment, size, |key| {
                    SegmentObject::create_inside(key, &shape, source, offset)
                });
            }
        }
        if pointer.is_null() || pointer as usize % PRIVATE_ALIGN != 0 {
            return Err(Error::InvalidArgument(format!(
                "segment_bind needs memory aligned to {PRIVATE_ALIGN} bytes, the size of \
                 the words atomics act on (got {pointer:p})"
            )));
        }
        let page = page_size();
        if pointer as usize % page != 0 || size % page != 0 {
            // Not whole pages: rebinding them would take the neighbours on
            // their first and last pages along. The data stays private.
            return self.engine.add_segment(segment, size, |key| {
                // SAFETY: validity for `size` bytes until the segment is
                // deleted is this function's contract.
                unsafe { SegmentObject::create_private(key, &shape, pointer) }
            });
        }
        self.engine.add_segment(segment, size, |key| {
            // SAFETY: alignment checked above; ownership, exclusivity and
            // lifetime are this function's contract.
            unsafe { SegmentObject::create_bound(key, &shape, pointer) }
        })
    }

    /// Bind `size` bytes at `pointer` as segment `segment` and register it
    /// with every member of `group`, collectively (`gaspi_segment_use`).
    ///
    /// # Safety
    /// As for [`Context::segment_bind`].
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, Local, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
    /// let mem = unsafe { std::alloc::alloc_zeroed(layout) };
    /// // Every rank's page becomes its segment 2, registered with all.
    /// unsafe { ctx.segment_use(2, mem, 4096, GroupId::ALL, Timeout::Block)? };
    /// let right = (ctx.rank() + 1) % ctx.num_ranks();
    /// unsafe { mem.write(7) };
    /// ctx.write(Local::new(2, 0), Remote::new(right, 2, 8), 1, 0, Timeout::Block)?;
    /// ctx.wait(0, Timeout::Block)?;
    /// ctx.barrier(GroupId::ALL, Timeout::Block)?;
    /// assert_eq!(ctx.segment::<u8>(2)?.get(8), 7); // from the left neighbour
    /// ctx.barrier(GroupId::ALL, Timeout::Block)?;
    /// ctx.segment_delete(2)?;
    /// unsafe { std::alloc::dealloc(mem, layout) };
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub unsafe fn segment_use(
        &self,
        segment: SegmentId,
        pointer: *mut u8,
        size: usize,
        group: GroupId,
        timeout: Timeout,
    ) -> Result<()> {
        let members = self.committed_members(group)?;
        self.collective_segment(segment, group, &members, timeout, || {
            // SAFETY: forwarded from this function's contract.
            unsafe { self.segment_bind(segment, pointer, size) }
        })
    }

    /// Delete this rank's segment `segment` (`gaspi_segment_delete`). Other
    /// ranks' operations on it fail with [`Error::SegmentNotFound`] (or
    /// [`Error::SegmentNotRegistered`] across hosts); views still held keep
    /// the memory mapped until they are dropped. Across hosts, writes
    /// another rank posted just before the deletion may still arrive: the
    /// memory stays in place for them (on the MPI engine until a barrier
    /// over every rank it was registered with, on the GPI-2 engine until
    /// this rank terminates, or until the process exits where a rank
    /// failed), so they never land in a segment made later or in memory
    /// given back. Memory of [`Context::segment_bind`] goes back to the
    /// caller at once (see there).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(1, 4096, gaspi::Alloc::Initialized)?;
    /// ctx.segment_delete(1)?;
    /// assert!(ctx.segment_list().is_empty());
    /// assert!(matches!(ctx.segment_delete(1), Err(gaspi::Error::SegmentNotFound { .. })));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_delete(&self, segment: SegmentId) -> Result<()> {
        self.check_segment_id(segment)?;
        self.groups.forget_pending_create(segment);
        self.engine.remove_segment(segment)
    }

    /// Address of the first byte of this rank's segment `segment`
    /// (`gaspi_segment_ptr`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let p = ctx.segment_ptr(0)?;
    /// assert_eq!(p, ctx.segment::<u8>(0)?.as_ptr());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_ptr(&self, segment: SegmentId) -> Result<*mut u8> {
        self.check_segment_id(segment)?;
        Ok(self.engine.local_arc(segment)?.data())
    }

    /// Size in bytes of segment `segment` of `rank` (`gaspi_segment_size`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_create(0, 4096, gaspi::GroupId::ALL, gaspi::Timeout::Block, gaspi::Alloc::Initialized)?;
    /// // Every member of the creating group has it, at the same size.
    /// let right = (ctx.rank() + 1) % ctx.num_ranks();
    /// assert_eq!(ctx.segment_size(0, right)?, 4096);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_size(&self, segment: SegmentId, rank: Rank) -> Result<usize> {
        self.check_segment_id(segment)?;
        self.engine.segment_size(rank, segment)
    }

    /// Number of segments of this rank (`gaspi_segment_num`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// ctx.segment_alloc(3, 64, gaspi::Alloc::Initialized)?;
    /// assert_eq!(ctx.segment_num(), 2);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_num(&self) -> usize {
        self.segment_list().len()
    }

    /// Ids of this rank's segments, ascending (`gaspi_segment_list`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(3, 64, gaspi::Alloc::Initialized)?;
    /// ctx.segment_alloc(1, 64, gaspi::Alloc::Initialized)?;
    /// assert_eq!(ctx.segment_list(), vec![1, 3]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_list(&self) -> Vec<SegmentId> {
        let mut ids = self.engine.segment_ids();
        ids.retain(|&s| s != RESERVED_SEGMENT);
        ids
    }

    /// Segment ids are `0..segment_max()` (`gaspi_segment_max`).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config { segment_max: 8, ..Default::default() })?;
    /// assert_eq!(ctx.segment_max(), 8);
    /// assert!(matches!(ctx.segment_alloc(8, 64, gaspi::Alloc::Initialized), Err(gaspi::Error::InvalidSegmentId { .. })));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_max(&self) -> u32 {
        self.config.segment_max
    }

    /// The lowest segment id not in use on this rank
    /// (`gaspi_segment_avail_local`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let free = ctx.segment_avail_local()?;
    /// assert_eq!(free, 1);
    /// ctx.segment_alloc(free, 64, gaspi::Alloc::Initialized)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_avail_local(&self) -> Result<SegmentId> {
        let used = self.engine.segment_ids();
        (0..self.config.segment_max)
            .map(|s| s as SegmentId)
            .find(|s| !used.contains(s))
            .ok_or_else(|| Error::InvalidArgument("every segment id is in use".into()))
    }

    /// A typed view of this rank's segment `segment`.
    ///
    /// Fails with [`Error::InvalidArgument`] where the segment's memory is
    /// not aligned for `T` (a segment bound to memory with less alignment
    /// than `T` needs, see [`Context::segment_bind`]).
    ///
    /// ```
    /// # use gaspi::{Alloc, Config, Context};
    /// # let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// let v = ctx.segment::<f64>(0)?;
    /// v.copy_from_slice(2, &[1.5, 2.5]);
    /// assert_eq!(v.get(3), 2.5);
    /// assert_eq!(v.len(), 8);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment<T: Pod>(&self, segment: SegmentId) -> Result<SegmentView<T>> {
        self.check_segment_id(segment)?;
        let obj = self.engine.local_arc(segment)?;
        let align = std::mem::align_of::<T>();
        if obj.data() as usize % align != 0 {
            return Err(Error::InvalidArgument(format!(
                "segment {segment} starts at {:p}, not aligned for elements of {align}-byte \
                 alignment",
                obj.data()
            )));
        }
        Ok(SegmentView::of(obj))
    }
}

/// A typed view of a local segment: `len()` elements of `T`.
///
/// The memory is shared with other ranks, which may write it whenever the
/// program's protocol lets them (typically before a notification). Element
/// access ([`get`](SegmentView::get), [`set`](SegmentView::set)) uses
/// volatile loads and stores, so a polling loop really reads memory; bulk
/// copies are plain copies, to be ordered by notifications or barriers.
/// [`as_slice`](SegmentView::as_slice) and
/// [`as_mut_slice`](SegmentView::as_mut_slice) lend the memory as Rust
/// slices and are `unsafe`: the caller promises that nobody writes it (or,
/// for the mutable one, touches it) meanwhile.
///
/// Element `i` is at byte offset `i * size_of::<T>()`, which is what the
/// one-sided operations take as offsets. A view keeps the memory mapped even
/// if the segment is deleted.
///
/// ```
/// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
/// ctx.segment_alloc(0, 1024, gaspi::Alloc::Initialized)?;
/// let words = ctx.segment::<u32>(0)?;
/// words.fill(7);
/// assert_eq!(words.len(), 256);
/// assert!(words.to_vec().iter().all(|&w| w == 7));
/// // Element i is at byte offset i * 4 for the one-sided operations.
/// let byte_offset_of_10 = 10 * std::mem::size_of::<u32>();
/// assert_eq!(byte_offset_of_10, 40);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SegmentView<T> {
    obj: Arc<SegmentObject>,
    /// Byte offset of element 0 in the segment.
    start: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> SegmentView<T> {
    /// A view of `obj`.
    pub(crate) fn of(obj: Arc<SegmentObject>) -> SegmentView<T> {
        let len = obj.size() / std::mem::size_of::<T>().max(1);
        SegmentView {
            obj,
            start: 0,
            len,
            _t: PhantomData,
        }
    }

    /// `len` elements of `obj` from byte `start` on, which need not be a
    /// multiple of the element size (areas of a window are laid out in
    /// bytes, and elements of 12 or 24 bytes do not divide their
    /// 64-byte borders).
    ///
    /// # Panics
    /// If the elements are not all inside `obj` (a caller's bug).
    pub(crate) fn at(obj: Arc<SegmentObject>, start: usize, len: usize) -> SegmentView<T> {
        let end = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.checked_add(start));
        assert!(
            end.is_some_and(|end| end <= obj.size()),
            "a view of {len} elements at byte {start} outside a segment of {} bytes",
            obj.size()
        );
        SegmentView {
            obj,
            start,
            len,
            _t: PhantomData,
        }
    }

    /// The elements `range` of this view as a view of their own (element 0
    /// of the result is element `range.start` here).
    ///
    /// # Panics
    /// If `range` is not inside the view, as slice indexing does;
    /// [`SegmentView::try_sub`] returns an error instead.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_create(0, 64, gaspi::GroupId::ALL, gaspi::Timeout::Block, gaspi::Alloc::Initialized)?;
    /// let words = ctx.segment::<u64>(0)?;
    /// words.set(5, 7);
    /// assert_eq!(words.sub(4..8).get(1), 7);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn sub(&self, range: std::ops::Range<usize>) -> SegmentView<T> {
        self.try_sub(range).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`SegmentView::sub`], with an [`Error::InvalidArgument`] for a range
    /// that is not inside the view (or ends before it starts).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let words = ctx.segment::<u64>(0)?; // 8 words
    /// assert_eq!(words.try_sub(6..8)?.len(), 2);
    /// assert!(words.try_sub(6..9).is_err());
    /// assert!(words.try_sub(usize::MAX..usize::MAX).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn try_sub(&self, range: std::ops::Range<usize>) -> Result<SegmentView<T>> {
        let count = range.end.checked_sub(range.start).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "sub-view {range:?} of a segment view ends before it starts"
            ))
        })?;
        Ok(SegmentView {
            obj: self.obj.clone(),
            start: self.checked_offset(range.start, count)?,
            len: count,
            _t: PhantomData,
        })
    }

    /// Number of whole `T`s in the segment.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(0, 100, gaspi::Alloc::Initialized)?;
    /// assert_eq!(ctx.segment::<u64>(0)?.len(), 12); // whole u64s only
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if not even one `T` fits.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(0, 4, gaspi::Alloc::Initialized)?;
    /// assert!(ctx.segment::<u64>(0)?.is_empty());
    /// assert!(!ctx.segment::<u32>(0)?.is_empty());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment's byte offset of elements `index..index + count`, or an
    /// error if they are not all inside the view.
    fn checked_offset(&self, index: usize, count: usize) -> Result<usize> {
        match index.checked_add(count) {
            // In the view, so inside the segment: the product cannot wrap.
            Some(end) if end <= self.len => Ok(self.start + index * std::mem::size_of::<T>()),
            _ => Err(Error::InvalidArgument(format!(
                "elements {index}..{index}+{count} of a segment view of {} elements of {} \
                 bytes: they must lie inside the view",
                self.len,
                std::mem::size_of::<T>()
            ))),
        }
    }

    /// [`SegmentView::checked_offset`] for the calls that panic, as slice
    /// indexing does, on an index out of range.
    fn offset(&self, index: usize, count: usize) -> usize {
        self.checked_offset(index, count)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Element `index` (volatile load).
    ///
    /// # Panics
    /// If `index` is not below [`SegmentView::len`], as slice indexing
    /// does; [`SegmentView::try_get`] returns an error instead.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let flags = ctx.segment::<u64>(0)?;
    /// // A polling loop reads memory every time.
    /// while flags.get(0) == 0 {
    ///     flags.set(0, 1); // (another rank would write it)
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn get(&self, index: usize) -> T {
        self.obj.load(self.offset(index, 1))
    }

    /// [`SegmentView::get`], with an [`Error::InvalidArgument`] for an
    /// index out of range.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u64>(0)?; // 8 words
    /// assert_eq!(v.try_get(7)?, 0);
    /// assert!(v.try_get(8).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn try_get(&self, index: usize) -> Result<T> {
        Ok(self.obj.load(self.checked_offset(index, 1)?))
    }

    /// Set element `index` (volatile store).
    ///
    /// # Panics
    /// If `index` is not below [`SegmentView::len`], as slice indexing
    /// does; [`SegmentView::try_set`] returns an error instead.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<i32>(0)?;
    /// v.set(3, -1);
    /// assert_eq!(v.get(3), -1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn set(&self, index: usize, value: T) {
        self.obj.store(self.offset(index, 1), value)
    }

    /// [`SegmentView::set`], with an [`Error::InvalidArgument`] for an
    /// index out of range (and nothing stored).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 16, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u32>(0)?; // 4 words
    /// v.try_set(3, 9)?;
    /// assert!(v.try_set(4, 9).is_err());
    /// assert_eq!(v.to_vec(), [0, 0, 0, 9]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn try_set(&self, index: usize, value: T) -> Result<()> {
        self.obj.store(self.checked_offset(index, 1)?, value);
        Ok(())
    }

    /// Copy `src` into elements `start..start+src.len()`.
    ///
    /// # Panics
    /// If those elements are not inside the view, as
    /// `<[T]>::copy_from_slice` does on a length mismatch;
    /// [`SegmentView::try_copy_from_slice`] returns an error instead.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u16>(0)?;
    /// v.copy_from_slice(4, &[1, 2, 3]);
    /// assert_eq!(v.get(6), 3);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn copy_from_slice(&self, start: usize, src: &[T]) {
        self.copy_from_slice_with(start, src, false);
    }

    /// [`SegmentView::copy_from_slice`], with an [`Error::InvalidArgument`]
    /// (and nothing copied) if the elements are not inside the view.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 8, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u16>(0)?; // 4 elements
    /// v.try_copy_from_slice(2, &[1, 2])?;
    /// assert!(v.try_copy_from_slice(3, &[1, 2]).is_err());
    /// assert_eq!(v.to_vec(), [0, 0, 1, 2]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn try_copy_from_slice(&self, start: usize, src: &[T]) -> Result<()> {
        self.write_at(start, src, false)
    }

    /// [`SegmentView::copy_from_slice`], with non-temporal stores where
    /// `streaming` (see `crate::engine::memcopy::copy_slice_streaming`):
    /// for a collective's large pieces that outgrow the caches.
    pub(crate) fn copy_from_slice_with(&self, start: usize, src: &[T], streaming: bool) {
        self.write_at(start, src, streaming)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The copy of the `copy_from_slice` calls.
    fn write_at(&self, start: usize, src: &[T], streaming: bool) -> Result<()> {
        let offset = self.checked_offset(start, src.len())?;
        self.obj
            .write_from(offset, bytemuck::cast_slice(src), streaming);
        Ok(())
    }

    /// Copy elements `start..start+dst.len()` into `dst`.
    ///
    /// # Panics
    /// If those elements are not inside the view;
    /// [`SegmentView::try_copy_to_slice`] returns an error instead.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u16>(0)?;
    /// v.copy_from_slice(0, &[9, 8, 7]);
    /// let mut out = [0u16; 2];
    /// v.copy_to_slice(1, &mut out);
    /// assert_eq!(out, [8, 7]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn copy_to_slice(&self, start: usize, dst: &mut [T]) {
        self.copy_to_slice_with(start, dst, false);
    }

    /// [`SegmentView::copy_to_slice`], with an [`Error::InvalidArgument`]
    /// (and `dst` untouched) if the elements are not inside the view.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 8, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u16>(0)?; // 4 elements
    /// let mut out = [7u16; 3];
    /// assert!(v.try_copy_to_slice(2, &mut out).is_err());
    /// assert_eq!(out, [7, 7, 7]);
    /// v.try_copy_to_slice(1, &mut out)?;
    /// assert_eq!(out, [0, 0, 0]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn try_copy_to_slice(&self, start: usize, dst: &mut [T]) -> Result<()> {
        self.read_at(start, dst, false)
    }

    /// [`SegmentView::copy_to_slice`], with non-temporal stores where
    /// `streaming` (see `crate::engine::memcopy::copy_slice_streaming`):
    /// for a collective's large private results that outgrow the caches.
    pub(crate) fn copy_to_slice_with(&self, start: usize, dst: &mut [T], streaming: bool) {
        self.read_at(start, dst, streaming)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The copy of the `copy_to_slice` calls.
    fn read_at(&self, start: usize, dst: &mut [T], streaming: bool) -> Result<()> {
        let offset = self.checked_offset(start, dst.len())?;
        self.obj
            .read_into(offset, bytemuck::cast_slice_mut(dst), streaming);
        Ok(())
    }

    /// All elements, copied.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 16, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u32>(0)?;
    /// v.set(1, 5);
    /// assert_eq!(v.to_vec(), vec![0, 5, 0, 0]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        let mut v = vec![T::zeroed(); self.len];
        self.copy_to_slice(0, &mut v);
        v
    }

    /// Set every element to `value`.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<f64>(0)?;
    /// v.sub(2..4).fill(0.5);
    /// assert_eq!(v.to_vec(), vec![0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn fill(&self, value: T) {
        const CHUNK: usize = 4096;
        let block = vec![value; CHUNK.min(self.len)];
        let mut i = 0;
        while i < self.len {
            let n = CHUNK.min(self.len - i);
            self.copy_from_slice(i, &block[..n]);
            i += n;
        }
    }

    /// The 8-byte word at byte offset `byte_offset` of the view as an
    /// atomic, for local access to words that remote ranks update with
    /// `atomic_fetch_add` or `atomic_compare_swap`. A word that is not
    /// inside the view is an [`Error::InvalidArgument`]; one that is not
    /// 8-byte aligned in its segment an [`Error::MisalignedAtomic`] (with
    /// the segment's offset, as the one-sided atomics report it).
    ///
    /// ```
    /// # use std::sync::atomic::Ordering;
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let counter = gaspi::Remote::new(ctx.rank(), 0, 8);
    /// ctx.atomic_fetch_add(counter, 3, gaspi::Timeout::Block)?;
    /// let v = ctx.segment::<u8>(0)?;
    /// assert_eq!(v.atomic_u64(8)?.load(Ordering::Acquire), 3);
    /// assert!(matches!(v.atomic_u64(12), Err(gaspi::Error::MisalignedAtomic { offset: 12 })));
    /// assert!(v.atomic_u64(64).is_err()); // past the end
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn atomic_u64(&self, byte_offset: usize) -> Result<&AtomicU64> {
        let bytes = self.len * std::mem::size_of::<T>();
        if byte_offset.checked_add(8).is_none_or(|end| end > bytes) {
            return Err(Error::InvalidArgument(format!(
                "atomic word at byte {byte_offset} of a view of {bytes} bytes: the word must \
                 lie inside the view"
            )));
        }
        let offset = self.start + byte_offset;
        if offset % 8 != 0 {
            return Err(Error::MisalignedAtomic { offset });
        }
        Ok(self.obj.atomic_u64(offset))
    }

    /// The view's whole 8-byte words as atomics: shared access at full
    /// speed without `unsafe` (a relaxed load or store is a plain move on
    /// common CPUs; read-modify-writes such as `fetch_xor` are atomic among
    /// all ranks of a node). A view that does not start 8-byte aligned in
    /// its segment is an [`Error::MisalignedAtomic`].
    ///
    /// ```
    /// # use std::sync::atomic::Ordering::Relaxed;
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let win = ctx.window_create(0, 1024, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// let words = win.view::<u64>().sub(4..8);
    /// let w = words.atomic_u64s()?;
    /// assert_eq!(w.len(), 4);
    /// w[1].fetch_xor(0b101, Relaxed); // atomic among the node's ranks
    /// assert_eq!(win.view::<u64>().get(5), 0b101);
    /// assert!(win.view::<u32>().sub(1..4).atomic_u64s().is_err()); // starts at byte 4
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn atomic_u64s(&self) -> Result<&[AtomicU64]> {
        let bytes = self.len * std::mem::size_of::<T>();
        if self.start % 8 != 0 {
            return Err(Error::MisalignedAtomic { offset: self.start });
        }
        Ok(self.obj.atomic_u64s(self.start, bytes / 8))
    }

    /// Pointer to the first element.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u64>(0)?;
    /// // A sub-view starts at its first element.
    /// assert_eq!(v.sub(4..8).as_ptr(), v.as_ptr().wrapping_add(4));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn as_ptr(&self) -> *mut T {
        self.obj.data().wrapping_add(self.start).cast()
    }

    /// The segment as a slice.
    ///
    /// # Safety
    /// While the slice lives, no rank (this one included, through any view
    /// or operation) may write the segment.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(0, 32, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u64>(0)?;
    /// v.copy_from_slice(0, &[1, 2, 3, 4]);
    /// // No other rank reaches this segment: it is registered with none.
    /// let sum: u64 = unsafe { v.as_slice() }.iter().sum();
    /// assert_eq!(sum, 10);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub unsafe fn as_slice(&self) -> &[T] {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.obj.as_slice(self.start, self.len) }
    }

    /// The segment as a mutable slice.
    ///
    /// # Safety
    /// While the slice lives, nothing else may read or write the segment:
    /// no remote operation on it, no other view, slice or thread.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.segment_alloc(0, 32, gaspi::Alloc::Initialized)?;
    /// let v = ctx.segment::<u64>(0)?;
    /// // Registered with no other rank, used by no other view meanwhile.
    /// let s = unsafe { v.as_mut_slice() };
    /// s.iter_mut().enumerate().for_each(|(i, x)| *x = i as u64);
    /// assert_eq!(v.to_vec(), [0, 1, 2, 3]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [T] {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.obj.as_mut_slice(self.start, self.len) }
    }
}
