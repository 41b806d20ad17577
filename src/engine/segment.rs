//! The shared-memory object behind a segment: one rank's own segment, or a
//! node-shared window that is the segment of every rank of a node.
//!
//! Layout, from offset 0: a [`SegmentHeader`], the registration bitmap (one
//! bit per rank), the notification values, the two summary levels, then, at
//! the next page boundary, the data. Its creator makes it; others open it by
//! name once they find its [`ObjectId`] in a rank's directory, and write,
//! read and post notifications directly in it.
//!
//! A segment bound inside the data of another segment of the same rank
//! (GPI-2's sub-segments: `segment_bind` on memory of a segment) has an
//! object of its own for its header and notification table only; its data
//! is the other object's, which peers open too ([`SegmentObject::open`]),
//! so every rank reaches the same bytes through either segment.
//!
//! A segment bound to memory that is not whole pages (a `Vec`'s buffer,
//! GPI-2's `malloc`ed buffers) cannot be rebound and shared: its object
//! holds only the header and notification table, and its data stays the
//! owner's private memory. Other ranks of the host may notify it; their
//! access to its data fails ([`SegmentObject::data_unreachable`]).
//!
//! A window's table also counts, node-wide and for ever increasing, the
//! notifications posted into it and those claimed from it
//! ([`NotificationTable::claim`]), so that its ranks can wait for "K more
//! notifications" without scanning the table.

use super::job::{Names, ObjectId};
use super::memcopy;
use super::notify::{self, Counters, NotificationTable};
use super::shm::{self, BoundRegion, Mapping, Shared};
use super::wait::WaitWord;
use crate::error::Result;
use crate::extent;
use crate::types::Rank;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

const MAGIC: u64 = 0x4741_5350_4953_4547; // "GASPISEG"

/// The fixed-size start of a segment object.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct SegmentHeader {
    magic: AtomicU64,
    /// The packed [`ObjectId`].
    object: AtomicU64,
    data_size: AtomicU64,
    notification_num: AtomicU32,
    nranks: AtomicU32,
    /// 1 if the table keeps `counters`.
    counting: AtomicU32,
    /// 1 if the data is the owner's private memory, not in any object.
    private_data: AtomicU32,
    /// For data inside another object: that object's segment id, packed
    /// [`ObjectId`] (0: the data is this object's) and data offset.
    inside_segment: AtomicU32,
    inside_object: AtomicU64,
    inside_offset: AtomicU64,
    /// Woken by notification posts (and claims, in counting tables).
    ww: WaitWord,
    counters: Counters,
}

// SAFETY: atomics only.
unsafe impl Shared for SegmentHeader {}

/// Byte offsets of the parts of a segment object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ObjectLayout {
    reg: usize,
    values: usize,
    l1: usize,
    l2: usize,
    data: usize,
    total: usize,
}

impl ObjectLayout {
    /// The layout for `data_size` bytes of data, `notification_num`
    /// notifications and `nranks` ranks; every sum checked
    /// ([`Error::SizeOverflow`](crate::error::Error::SizeOverflow) for a
    /// size no mapping can hold).
    fn new(nranks: usize, notification_num: u32, data_size: usize) -> Result<ObjectLayout> {
        use extent::{add, align_up, mul};
        let what = "segment size";
        let a = |n: usize| align_up(what, n, 64);
        let reg = a(std::mem::size_of::<SegmentHeader>())?;
        let values = a(add(what, reg, mul(what, nranks.div_ceil(64), 8)?)?)?;
        let l1 = a(add(what, values, mul(what, notification_num as usize, 4)?)?)?;
        let l2 = a(add(
            what,
            l1,
            mul(what, notify::l1_words(notification_num), 8)?,
        )?)?;
        let tables = add(what, l2, mul(what, notify::l2_words(notification_num), 8)?)?;
        let data = align_up(what, tables, shm::page_size())?;
        let total = add(
            what,
            data,
            align_up(what, data_size.max(1), shm::page_size())?,
        )?;
        Ok(ObjectLayout {
            reg,
            values,
            l1,
            l2,
            data,
            total,
        })
    }
}

/// Where the notification table lies in a mapping, computed and checked
/// once when the object is mapped.
#[derive(Debug)]
struct TableParts {
    values: *const AtomicU32,
    l1: *const AtomicU64,
    l2: *const AtomicU64,
    ww: *const WaitWord,
    /// Null unless the table counts.
    counters: *const Counters,
    num: usize,
}

impl TableParts {
    fn new(map: &Mapping, layout: &ObjectLayout, num: u32, counting: bool) -> TableParts {
        let n = num as usize;
        let h = map.at::<SegmentHeader>(0);
        // Mapping::slice checks bounds and alignment once, here.
        TableParts {
            values: map.slice::<AtomicU32>(layout.values, n).as_ptr(),
            l1: map
                .slice::<AtomicU64>(layout.l1, notify::l1_words(num))
                .as_ptr(),
            l2: map
                .slice::<AtomicU64>(layout.l2, notify::l2_words(num))
                .as_ptr(),
            ww: &h.ww,
            counters: if counting {
                &h.counters
            } else {
                std::ptr::null()
            },
            num: n,
        }
    }
}

/// One mapped segment object: the owner's or a peer's view.
#[derive(Debug)]
pub(crate) struct SegmentObject {
    table: TableParts,
    /// Which object this is.
    id: ObjectId,
    name: String,
    /// Header, tables and (unless bound) data.
    map: Mapping,
    /// The owner's user memory rebound onto the object (`segment_bind`).
    bound: Option<BoundRegion>,
    /// The object whose data this segment's data is part of, if any.
    inside: Option<Inside>,
    /// The owner's private memory that is the data, if so (the owner's
    /// view).
    private: Option<*mut u8>,
    /// A peer's view of private data (its own, or that of the object its
    /// data is inside): see [`SegmentObject::data_unreachable`].
    unreachable: bool,
    /// The owner's segments whose data lies inside this one's: while
    /// there are any, [`SegmentObject::unlink`] leaves the name for peers
    /// that have yet to open them.
    insiders: Mutex<Insiders>,
    segment: u8,
    layout: ObjectLayout,
    size: usize,
    notification_num: u32,
    nranks: usize,
}

// SAFETY: the raw pointers in `table` point into `map`, owned by the same
// object and itself Send + Sync (process-shared memory reached only through
// atomics and raw copies); they are never freed separately. A private
// segment's data pointer (`private`) is memory the caller keeps
// valid while the object lives (`create_private`), reached like the mapped
// data: by raw copies and atomics, never through Rust references.
unsafe impl Send for SegmentObject {}
// SAFETY: see Send.
unsafe impl Sync for SegmentObject {}

/// Data that is part of another object's ([`SegmentObject::create_inside`]).
#[derive(Debug)]
struct Inside {
    source: Arc<SegmentObject>,
    offset: usize,
    /// The owner's object (not a peer's mapping): counted in the source's
    /// [`Insiders`].
    owned: bool,
}

impl Drop for Inside {
    fn drop(&mut self) {
        if self.owned {
            let mut i = self
                .source
                .insiders
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            i.count -= 1;
            if i.count == 0 && i.unlink_pending {
                i.unlink_pending = false;
                let _ = shm::unlink(&self.source.name);
            }
        }
    }
}

/// See [`SegmentObject::insiders`].
#[derive(Debug, Default)]
struct Insiders {
    count: usize,
    unlink_pending: bool,
}

/// What the data of a new object is.
enum Data {
    /// Its own, zeroed.
    Own,
    /// The caller's memory at this address, rebound onto the object.
    Bound(*mut u8),
    /// Part of another object's data.
    Inside(Arc<SegmentObject>, usize),
    /// The caller's memory at this address, left as it is: private.
    Private(*mut u8),
}

/// Which object: object `id` as segment `segment` of job `token`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentKey<'a> {
    pub(crate) names: &'a Names,
    pub(crate) segment: u8,
    pub(crate) id: ObjectId,
}

impl SegmentKey<'_> {
    fn name(&self) -> String {
        self.id.name(self.names, self.segment)
    }
}

/// `len` bytes at data offset `off` of a segment object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span<'a> {
    pub(crate) obj: &'a SegmentObject,
    pub(crate) off: usize,
    pub(crate) len: usize,
}

impl Span<'_> {
    /// First byte; panics if the span is not inside the segment.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.obj.span(self.off, self.len)
    }
}

/// The shape of a new segment object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) size: usize,
    pub(crate) notification_num: u32,
    pub(crate) nranks: usize,
    /// Keep node-wide posted/claimed counters (windows).
    pub(crate) counting: bool,
}

impl SegmentObject {
    /// Create the object `key` of `shape` with `data`.
    ///
    /// # Safety
    /// With [`Data::Bound`], as [`BoundRegion::bind`]; with
    /// [`Data::Private`], the memory must stay valid for `shape.size` bytes
    /// while the object lives.
    unsafe fn make(key: &SegmentKey, shape: &Shape, data: Data) -> io::Result<SegmentObject> {
        let name = key.name();
        let layout = ObjectLayout::new(shape.nranks, shape.notification_num, shape.size)
            .map_err(extent::io_error)?;
        // Data inside another object, or private, takes no room in this one.
        let file = match data {
            Data::Inside(..) | Data::Private(_) => layout.data,
            Data::Own | Data::Bound(_) => layout.total,
        };
        let fd = shm::create(&name, file)?;
        let made = (|| {
            let len = match data {
                Data::Own => layout.total,
                _ => layout.data,
            };
            let map = Mapping::new(&fd, len, 0, true)?;
            let h = map.at::<SegmentHeader>(0);
            h.object.store(key.id.pack(), SeqCst);
            h.data_size.store(shape.size as u64, SeqCst);
            h.notification_num.store(shape.notification_num, SeqCst);
            h.nranks.store(shape.nranks as u32, SeqCst);
            h.counting.store(shape.counting as u32, SeqCst);
            let (mut bound, mut inside, mut private) = (None, None, None);
            match data {
                Data::Own => {}
                Data::Private(ptr) => {
                    h.private_data.store(1, SeqCst);
                    private = Some(ptr);
                }
                Data::Bound(ptr) => {
                    // SAFETY: forwarded from this function's contract; the
                    // data part of the object starts at the page-aligned
                    // `layout.data`.
                    let b = unsafe { BoundRegion::bind(&fd, layout.data, ptr, shape.size) }?;
                    bound = Some(b);
                }
                Data::Inside(source, offset) => {
                    h.inside_segment.store(source.segment.into(), SeqCst);
                    h.inside_object.store(source.id.pack(), SeqCst);
                    h.inside_offset.store(offset as u64, SeqCst);
                    source
                        .insiders
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .count += 1;
                    inside = Some(Inside {
                        source,
                        offset,
                        owned: true,
                    });
                }
            }
            h.magic.store(MAGIC, SeqCst);
            Ok(SegmentObject {
                table: TableParts::new(&map, &layout, shape.notification_num, shape.counting),
                id: key.id,
                name: name.clone(),
                map,
                bound,
                inside,
                private,
                unreachable: false,
                insiders: Mutex::default(),
                segment: key.segment,
                layout,
                size: shape.size,
                notification_num: shape.notification_num,
                nranks: shape.nranks,
            })
        })();
        if made.is_err() {
            let _ = shm::unlink(&name);
        }
        made
    }

    /// The bytes an object of `shape` needs, checked to fit in the
    /// shared-memory file system now (see [`shm::check_room`]); with
    /// `bound`, the data is the caller's memory and not counted.
    pub(crate) fn check_shape(shape: &Shape, bound: bool) -> io::Result<usize> {
        let layout = ObjectLayout::new(shape.nranks, shape.notification_num, shape.size)
            .map_err(extent::io_error)?;
        let len = if bound { layout.data } else { layout.total };
        shm::check_room(len)?;
        Ok(layout.total)
    }

    /// Create the object `key` of `shape` with zeroed data.
    pub(crate) fn create(key: &SegmentKey, shape: &Shape) -> io::Result<SegmentObject> {
        // SAFETY: no memory is bound.
        unsafe { SegmentObject::make(key, shape, Data::Own) }
    }

    /// Like [`SegmentObject::create`], but the data is the caller's memory
    /// at `ptr`, rebound in place onto the object (its content is kept).
    ///
    /// # Safety
    /// As [`BoundRegion::bind`]: page-aligned memory owned by the caller,
    /// untouched by other threads during the call, valid until the object is
    /// dropped.
    pub(crate) unsafe fn create_bound(
        key: &SegmentKey,
        shape: &Shape,
        ptr: *mut u8,
    ) -> io::Result<SegmentObject> {
        // SAFETY: forwarded from this function's contract.
        unsafe { SegmentObject::make(key, shape, Data::Bound(ptr)) }
    }

    /// Like [`SegmentObject::create`], but the data is the caller's memory
    /// at `ptr`, left as it is: only this process reaches it
    /// ([`SegmentObject::data_unreachable`] for peers).
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `shape.size` bytes
    /// until the object is dropped.
    pub(crate) unsafe fn create_private(
        key: &SegmentKey,
        shape: &Shape,
        ptr: *mut u8,
    ) -> io::Result<SegmentObject> {
        // SAFETY: forwarded from this function's contract.
        unsafe { SegmentObject::make(key, shape, Data::Private(ptr)) }
    }

    /// Like [`SegmentObject::create`], but the data is `shape.size` bytes
    /// at data offset `offset` of `source` (this rank's object, whose data
    /// is its own or bound: not itself inside another), which stays mapped
    /// while this object lives.
    pub(crate) fn create_inside(
        key: &SegmentKey,
        shape: &Shape,
        source: Arc<SegmentObject>,
        offset: usize,
    ) -> io::Result<SegmentObject> {
        if source.inside.is_some()
            || offset
                .checked_add(shape.size)
                .is_none_or(|end| end > source.size)
        {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: no memory is rebound.
        unsafe { SegmentObject::make(key, shape, Data::Inside(source, offset)) }
    }

    /// The object this one's data is part of, and where in its data.
    pub(crate) fn inside_of(&self) -> Option<(&Arc<SegmentObject>, usize)> {
        self.inside.as_ref().map(|i| (&i.source, i.offset))
    }

    /// Open the object `key` as a peer.
    pub(crate) fn open(key: &SegmentKey) -> io::Result<SegmentObject> {
        let name = key.name();
        let (fd, total) = shm::open(&name)?;
        if total < shm::page_size() {
            // Its creator has not sized it yet: not there yet.
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let head = Mapping::new(&fd, shm::page_size().min(total), 0, false)?;
        let h = head.at::<SegmentHeader>(0);
        if h.magic.load(SeqCst) != MAGIC || h.object.load(SeqCst) != key.id.pack() {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let size = h.data_size.load(SeqCst) as usize;
        let notification_num = h.notification_num.load(SeqCst);
        let nranks = h.nranks.load(SeqCst) as usize;
        let counting = h.counting.load(SeqCst) == 1;
        let private = h.private_data.load(SeqCst) == 1;
        let source = ObjectId::unpack(h.inside_object.load(SeqCst));
        let source_segment = h.inside_segment.load(SeqCst);
        let offset = h.inside_offset.load(SeqCst);
        let layout = ObjectLayout::new(nranks, notification_num, size).ok();
        let expected = |l: &ObjectLayout| match (source, private) {
            (None, false) => l.total,
            _ => l.data,
        };
        let Some(layout) = layout.filter(|l| expected(l) == total) else {
            return Err(io::Error::other(
                "segment object with an inconsistent layout",
            ));
        };
        drop(head);
        let inside = match source {
            None => None,
            Some(id) => {
                let source = SegmentObject::open(&SegmentKey {
                    names: key.names,
                    segment: u8::try_from(source_segment)
                        .map_err(|_| io::Error::other("segment object names a bad segment id"))?,
                    id,
                })?;
                if source.inside.is_some() {
                    return Err(io::Error::other("segment object inside one inside another"));
                }
                let offset = usize::try_from(offset)
                    .ok()
                    .filter(|o| o.checked_add(size).is_some_and(|end| end <= source.size))
                    .ok_or_else(|| io::Error::other("segment object outside its source"))?;
                Some(Inside {
                    source: Arc::new(source),
                    offset,
                    owned: false,
                })
            }
        };
        let unreachable = private || inside.as_ref().is_some_and(|i| i.source.unreachable);
        // Peers fault pages in as they touch them: mapping every byte of
        // every peer's segments up front would cost page tables for all.
        let map = Mapping::new(&fd, total, 0, false)?;
        Ok(SegmentObject {
            table: TableParts::new(&map, &layout, notification_num, counting),
            id: key.id,
            name,
            map,
            bound: None,
            inside,
            private: None,
            unreachable,
            insiders: Mutex::default(),
            segment: key.segment,
            layout,
            size,
            notification_num,
            nranks,
        })
    }

    /// Remove the object's name (owner, at delete); mappings stay valid.
    /// While segments of the owner lie inside this one, the last of them
    /// to go removes it: peers open this object to reach their data.
    pub(crate) fn unlink(&self) {
        let mut i = self.insiders.lock().unwrap_or_else(|e| e.into_inner());
        if i.count > 0 {
            i.unlink_pending = true;
        } else {
            let _ = shm::unlink(&self.name);
        }
    }

    /// Which object this is.
    pub(crate) fn id(&self) -> ObjectId {
        self.id
    }

    /// Size of the data in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Whether the data is the caller's memory (`segment_bind`), which
    /// goes back to the caller when this object drops (or, inside it, when
    /// the last of this object and its insiders drops): such an object
    /// must not outlive its segment's deletion.
    pub(crate) fn is_user_memory(&self) -> bool {
        self.bound.is_some()
            || self.private.is_some()
            || self
                .inside
                .as_ref()
                .is_some_and(|i| i.source.is_user_memory())
    }

    /// First data byte; null where the data is out of this process's
    /// reach ([`SegmentObject::data_unreachable`]).
    pub(crate) fn data(&self) -> *mut u8 {
        if self.unreachable {
            return std::ptr::null_mut();
        }
        match (self.private, &self.bound, &self.inside) {
            (Some(p), _, _) => p,
            (None, Some(b), _) => b.ptr(),
            (None, None, Some(i)) => i.source.data().wrapping_add(i.offset),
            (None, None, None) => self.map.ptr().wrapping_add(self.layout.data),
        }
    }

    /// Whether the data is another process's private memory (a peer's view
    /// of a segment bound to memory that is not whole pages, or of one
    /// inside such a segment): its notifications are reachable, its data
    /// is not.
    #[inline]
    pub(crate) fn data_unreachable(&self) -> bool {
        self.unreachable
    }

    /// Number of notification ids.
    pub(crate) fn notification_num(&self) -> u32 {
        self.notification_num
    }

    /// The notification table.
    #[inline]
    pub(crate) fn notifications(&self) -> NotificationTable<'_> {
        let t = &self.table;
        let n = t.num as u32;
        // SAFETY: the parts were taken from checked slices and references
        // into `self.map` (TableParts::new), which lives as long as `self`;
        // the types are atomics, valid for any bits; `counters` is null or
        // such a reference.
        unsafe {
            NotificationTable {
                values: std::slice::from_raw_parts(t.values, t.num),
                l1: std::slice::from_raw_parts(t.l1, notify::l1_words(n)),
                l2: std::slice::from_raw_parts(t.l2, notify::l2_words(n)),
                ww: &*t.ww,
                counters: t.counters.as_ref(),
            }
        }
    }

    /// Pointer to `len` bytes at data offset `off`; panics if they are not
    /// inside the segment or out of this process's reach (callers validate
    /// user input before).
    pub(crate) fn span(&self, off: usize, len: usize) -> *mut u8 {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.size),
            "unchecked segment range"
        );
        let data = self.data();
        assert!(!data.is_null(), "unchecked access to private segment data");
        data.wrapping_add(off)
    }

    /// Copy `len` bytes from data offset `off` of `self` to data offset
    /// `dst_off` of `dst` (which may be `self`; ranges may overlap); with
    /// `streaming`, by non-temporal stores where they do not overlap
    /// ([`memcopy::copy_with`]).
    pub(crate) fn copy_to(
        &self,
        off: usize,
        dst: &SegmentObject,
        dst_off: usize,
        len: usize,
        streaming: bool,
    ) {
        let (s, d) = (self.span(off, len), dst.span(dst_off, len));
        // SAFETY: both ranges are inside live mappings (span checks), which
        // `self` and `dst` keep mapped for the duration of the call.
        // Concurrent access by other ranks is the GASPI contract's business:
        // the bytes are plain data and no Rust reference covers them.
        unsafe { memcopy::copy_with(s, d, len, streaming) };
    }

    /// Copy `out.len()` bytes from data offset `off` into `out`; with
    /// `streaming`, by non-temporal stores
    /// ([`memcopy::copy_nonoverlapping_streaming`]).
    pub(crate) fn read_into(&self, off: usize, out: &mut [u8], streaming: bool) {
        let s = self.span(off, out.len());
        // SAFETY: s..s+len is inside the mapping (span); `out` is a distinct
        // Rust buffer, so the ranges cannot overlap.
        unsafe { memcopy::copy_nonoverlapping_with(s, out.as_mut_ptr(), out.len(), streaming) };
    }

    /// Copy `data` to data offset `off`; with `streaming`, by non-temporal
    /// stores ([`memcopy::copy_nonoverlapping_streaming`]).
    pub(crate) fn write_from(&self, off: usize, data: &[u8], streaming: bool) {
        let d = self.span(off, data.len());
        // SAFETY: d..d+len is inside the mapping (span); `data` is a distinct
        // Rust buffer, so the ranges cannot overlap.
        unsafe { memcopy::copy_nonoverlapping_with(data.as_ptr(), d, data.len(), streaming) };
    }

    /// The 8-byte word at data offset `off` as an atomic; panics if out of
    /// range or not 8-byte aligned (callers validate before).
    pub(crate) fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        let p = self.span(off, 8);
        assert_eq!(p as usize % 8, 0, "unchecked atomic alignment");
        // SAFETY: p is inside the mapping (span), 8-byte aligned (checked),
        // and lives as long as &self; AtomicU64 is valid for any bits.
        unsafe { &*p.cast::<AtomicU64>() }
    }

    /// The `len` 8-byte words from data offset `off` as atomics; panics if
    /// out of range or not 8-byte aligned (callers validate before).
    pub(crate) fn atomic_u64s(&self, off: usize, len: usize) -> &[AtomicU64] {
        let bytes = len.checked_mul(8).expect("unchecked atomic range");
        let p = self.span(off, bytes);
        assert_eq!(p as usize % 8, 0, "unchecked atomic alignment");
        // SAFETY: p..p+8*len is inside the mapping (span), 8-byte aligned
        // (checked), and lives as long as &self; AtomicU64 is valid for any
        // bits, and atomics may be accessed from any rank at once.
        unsafe { std::slice::from_raw_parts(p.cast::<AtomicU64>(), len) }
    }

    /// Read the `T` at data offset `off` with a volatile load, so that a
    /// polling loop really reads memory each time.
    pub(crate) fn load<T: bytemuck::Pod>(&self, off: usize) -> T {
        let p = self.span(off, std::mem::size_of::<T>());
        // SAFETY: p..p+size_of::<T>() is inside the mapping (span); any
        // bytes are a valid T (Pod); unaligned reads are allowed.
        unsafe { std::ptr::read_volatile(p.cast::<T>()) }
    }

    /// Write `v` at data offset `off` with a volatile store.
    pub(crate) fn store<T: bytemuck::Pod>(&self, off: usize, v: T) {
        let p = self.span(off, std::mem::size_of::<T>());
        if p as usize % std::mem::align_of::<T>() == 0 {
            // SAFETY: inside the mapping (span) and aligned (checked).
            unsafe { std::ptr::write_volatile(p.cast::<T>(), v) };
        } else {
            self.write_from(off, bytemuck::bytes_of(&v), false);
        }
    }

    /// `len` `T`s at data offset `off` as a slice; panics if they are not
    /// inside the segment or not aligned for `T`.
    ///
    /// # Safety
    /// No writer (any rank, any thread) while the slice lives.
    pub(crate) unsafe fn as_slice<T: bytemuck::Pod>(&self, off: usize, len: usize) -> &[T] {
        let p = self.typed_span::<T>(off, len);
        // SAFETY: inside the mapping and aligned (typed_span); the mapping
        // lives as long as &self; absence of writers is the caller's
        // promise.
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    /// `len` `T`s at data offset `off` as a mutable slice; panics if they
    /// are not inside the segment or not aligned for `T`.
    ///
    /// # Safety
    /// No other access to those bytes (any rank, any thread, any other
    /// slice) while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn as_mut_slice<T: bytemuck::Pod>(&self, off: usize, len: usize) -> &mut [T] {
        let p = self.typed_span::<T>(off, len);
        // SAFETY: as `as_slice`, with exclusivity promised by the caller.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }

    fn typed_span<T>(&self, off: usize, len: usize) -> *mut T {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("slice length overflows");
        let p = self.span(off, bytes);
        assert_eq!(
            p as usize % std::mem::align_of::<T>(),
            0,
            "segment slice not aligned for its type"
        );
        p.cast()
    }

    fn registration(&self) -> &[AtomicU64] {
        self.map.slice(self.layout.reg, self.nranks.div_ceil(64))
    }

    /// Allow `rank` to access the segment.
    pub(crate) fn register(&self, rank: Rank) {
        let r = rank as usize;
        self.registration()[r / 64].fetch_or(1 << (r % 64), SeqCst);
    }

    /// Whether `rank` may access the segment.
    pub(crate) fn is_registered(&self, rank: Rank) -> bool {
        let r = rank as usize;
        r < self.nranks && self.registration()[r / 64].load(SeqCst) & (1 << (r % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::job;

    /// Object `number` of rank 0 as segment `segment` of the job `names`.
    fn key_of(names: &job::Names, segment: u8, number: u64) -> SegmentKey<'_> {
        SegmentKey {
            names,
            segment,
            id: ObjectId {
                kind: job::ObjectKind::Segment,
                owner: 0,
                number,
            },
        }
    }

    /// `size` bytes, 64 notifications, 2 ranks.
    fn shape(size: usize) -> Shape {
        Shape {
            size,
            notification_num: 64,
            nranks: 2,
            counting: false,
        }
    }

    #[test]
    fn layout_is_aligned_and_ordered() {
        let l = ObjectLayout::new(70, 65_536, 100).unwrap();
        assert!(l.reg < l.values && l.values < l.l1 && l.l1 < l.l2 && l.l2 < l.data);
        assert_eq!(l.data % shm::page_size(), 0);
        assert_eq!(l.values - l.reg, 64); // 2 words rounded to 64 bytes
        assert!(l.total >= l.data + 100);
    }

    #[test]
    fn a_size_no_mapping_can_hold_is_refused() {
        for size in [
            usize::MAX,
            usize::MAX - 4096,
            isize::MAX as usize,
            (isize::MAX as usize) - 8192,
        ] {
            assert!(ObjectLayout::new(2, 1024, size).is_err(), "{size}");
        }
    }

    #[test]
    fn owner_and_peer_share_data_notifications_and_registration() {
        let names = job::Names::fresh();
        let key = |number| key_of(&names, 3, number);
        let shape = Shape {
            size: 5000,
            notification_num: 1024,
            nranks: 4,
            counting: false,
        };
        let own = SegmentObject::create(&key(1), &shape).unwrap();
        let peer = SegmentObject::open(&key(1)).unwrap();
        assert!(SegmentObject::open(&key(3)).is_err());
        assert_eq!(peer.size(), 5000);
        // SAFETY: writing inside the 5000-byte data area of our own object.
        unsafe { peer.data().add(4999).write(0xAB) };
        // SAFETY: reading inside the data area.
        assert_eq!(unsafe { own.data().add(4999).read() }, 0xAB);
        peer.notifications().post(1000, 9);
        assert_eq!(own.notifications().find(0..1024), Some(1000));
        assert!(!peer.is_registered(2));
        own.register(2);
        assert!(peer.is_registered(2));
        assert!(!peer.is_registered(9));
        own.unlink();
        assert_eq!(job::sweep(names.token()), 0);
    }

    #[test]
    fn an_object_inside_another_shares_its_data_and_keeps_its_name() {
        let names = job::Names::fresh();
        let key = |segment, number| key_of(&names, segment, number);
        let outer = Arc::new(SegmentObject::create(&key(0, 1), &shape(3 * 4096)).unwrap());
        let inner =
            SegmentObject::create_inside(&key(1, 2), &shape(100), outer.clone(), 4096).unwrap();
        assert_eq!(inner.data(), outer.data().wrapping_add(4096));
        assert!(
            inner
                .inside_of()
                .is_some_and(|(o, at)| Arc::ptr_eq(o, &outer) && at == 4096)
        );
        // Past the end, or inside an object that is itself inside one.
        assert!(
            SegmentObject::create_inside(&key(2, 3), &shape(8193), outer.clone(), 4096).is_err()
        );
        let inner_arc = Arc::new(inner);
        assert!(SegmentObject::create_inside(&key(2, 4), &shape(8), inner_arc.clone(), 0).is_err());
        // A peer reaches the outer data through the inner object.
        let peer = SegmentObject::open(&key(1, 2)).unwrap();
        // SAFETY: inside the inner object's 100 bytes.
        unsafe { peer.data().add(99).write(0x5A) };
        // SAFETY: the same byte of the outer object's data.
        assert_eq!(unsafe { outer.data().add(4096 + 99).read() }, 0x5A);
        peer.notifications().post(3, 1);
        assert_eq!(inner_arc.notifications().find(0..64), Some(3));
        assert_eq!(outer.notifications().find(0..64), None);
        drop(peer);
        // The outer name stays while the inner object lives.
        outer.unlink();
        assert!(SegmentObject::open(&key(0, 1)).is_ok());
        inner_arc.unlink();
        drop(inner_arc);
        assert!(SegmentObject::open(&key(0, 1)).is_err());
        assert_eq!(job::sweep(names.token()), 0);
    }

    #[test]
    fn private_data_is_the_owners_alone_and_its_notifications_are_shared() {
        let names = job::Names::fresh();
        let key = |segment, number| key_of(&names, segment, number);
        let mut memory = vec![3u64; 125];
        let at = memory.as_mut_ptr().cast::<u8>();
        // SAFETY: `memory` holds 1000 bytes and outlives the objects.
        let own = Arc::new(
            unsafe { SegmentObject::create_private(&key(0, 1), &shape(1000), at) }.unwrap(),
        );
        assert_eq!(own.data(), at);
        assert!(!own.data_unreachable() && own.is_user_memory());
        assert_eq!(own.load::<u64>(992), 3);
        let inner = SegmentObject::create_inside(&key(1, 2), &shape(64), own.clone(), 64).unwrap();
        assert_eq!(inner.data(), at.wrapping_add(64));
        assert!(inner.is_user_memory());
        // A peer sees the size and shares the notifications, not the data,
        // through either object.
        let peer = SegmentObject::open(&key(0, 1)).unwrap();
        assert_eq!(peer.size(), 1000);
        assert!(peer.data_unreachable() && !peer.is_user_memory());
        assert!(std::panic::catch_unwind(|| peer.span(0, 8)).is_err());
        peer.notifications().post(5, 2);
        assert_eq!(own.notifications().find(0..64), Some(5));
        let peer_inner = SegmentObject::open(&key(1, 2)).unwrap();
        assert!(peer_inner.data_unreachable());
        inner.unlink();
        drop((peer, peer_inner, inner));
        own.unlink();
        drop(own);
        assert_eq!(job::sweep(names.token()), 0);
        assert!(memory.iter().all(|&w| w == 3));
    }
}
