//! Named POSIX shared-memory objects and their mappings.
//!
//! This module owns every `mmap`/`munmap` of the crate. Objects are created
//! owner-only (mode 0600) with `O_EXCL` under names that carry the job's
//! random 128-bit token, so another job can neither guess nor collide with
//! them, and [`open`] refuses objects that belong to another user.
//!
//! A [`Mapping`] hands out shared references only to types that implement
//! [`Shared`]: plain `#[repr(C)]` structs of atomics that are valid for any
//! bit pattern, because another process may write any bytes into them.

use rustix::fs::{FallocateFlags, Mode};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::shm;
use std::ffi::c_void;
use std::io;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Read-write: every mapping of the crate.
const RW: ProtFlags = ProtFlags::READ.union(ProtFlags::WRITE);

/// Where POSIX shared-memory objects appear as files on Linux.
pub(crate) const SHM_DIR: &str = "/dev/shm";

/// The size of a page; mappings and data areas are aligned to it.
pub(crate) fn page_size() -> usize {
    rustix::param::page_size()
}

fn shm_name(name: &str) -> String {
    format!("/{name}")
}

/// Create the object `name` (without leading slash) of `len` bytes,
/// owner-only, failing if it exists. Its memory reads as zeros.
///
/// The memory is reserved here (`fallocate`): if the file system
/// (`/dev/shm`) has less free space, this fails with `ENOSPC` and leaves
/// nothing behind, instead of succeeding with a sparse object whose first
/// touch of a missing page kills the process with `SIGBUS`.
pub(crate) fn create(name: &str, len: usize) -> io::Result<OwnedFd> {
    let flags = shm::OFlags::RDWR | shm::OFlags::CREATE | shm::OFlags::EXCL;
    let fd = shm::open(shm_name(name), flags, Mode::RUSR | Mode::WUSR)?;
    match size_and_reserve(&fd, len) {
        Ok(()) => Ok(fd),
        Err(e) => {
            let _ = unlink(name);
            Err(e)
        }
    }
}

fn no_space() -> io::Error {
    Errno::NOSPC.into()
}

/// `Err(ENOSPC)` if the shared-memory file system has fewer than `len`
/// bytes free (or `len` exceeds what an object can hold). Ranks of a
/// collective creation check this before it starts, so that they fail
/// together instead of waiting for an object its creator could not make.
pub(crate) fn check_room(len: usize) -> io::Result<()> {
    if i64::try_from(len).is_err() {
        return Err(no_space());
    }
    match free_bytes() {
        Some(free) if len as u64 > free => Err(no_space()),
        _ => Ok(()),
    }
}

/// Bytes free now in the shared-memory file system (`/dev/shm`), where it
/// says (`None`: unknown, or a file system that reports no size).
pub(crate) fn free_bytes() -> Option<u64> {
    let st = rustix::fs::statvfs(SHM_DIR).ok()?;
    (st.f_blocks != 0).then(|| st.f_bavail.saturating_mul(st.f_frsize.max(1)))
}

/// Give the new object `fd` its size `len` and reserve its memory.
fn size_and_reserve(fd: &OwnedFd, len: usize) -> io::Result<()> {
    let size = i64::try_from(len).map_err(|_| no_space())? as u64;
    // A quick refusal when the file system is too small, before anything
    // is allocated (the reservation below would fill it first).
    check_room(len)?;
    rustix::fs::ftruncate(fd, size)?;
    if len == 0 {
        return Ok(());
    }
    match rustix::fs::fallocate(fd, FallocateFlags::empty(), 0, size) {
        Ok(()) => Ok(()),
        // A file system that cannot reserve: the object stays sparse.
        Err(Errno::OPNOTSUPP | Errno::INVAL) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Open the existing object `name`; returns it with its size. Objects of
/// another user are refused with `PermissionDenied`.
pub(crate) fn open(name: &str) -> io::Result<(OwnedFd, usize)> {
    let fd = shm::open(shm_name(name), shm::OFlags::RDWR, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(io::Error::from(io::ErrorKind::PermissionDenied));
    }
    let size =
        usize::try_from(st.st_size).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    Ok((fd, size))
}

/// Remove the name `name`; mappings stay valid until unmapped.
pub(crate) fn unlink(name: &str) -> io::Result<()> {
    Ok(shm::unlink(shm_name(name))?)
}

/// Names of existing objects starting with `prefix`, of any user.
pub(crate) fn list(prefix: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Objects starting with `prefix` split by owner: this user's, and other
/// users' (`/dev/shm` is writable by all, so anyone can make an object
/// under a running job's public token). One gone meanwhile is in neither.
pub(crate) fn list_by_owner(prefix: &str) -> Owners {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let mut owners = Owners::default();
    for name in list(prefix) {
        match std::fs::symlink_metadata(std::path::Path::new(SHM_DIR).join(&name)) {
            Ok(m) if m.uid() == me => owners.own.push(name),
            Ok(_) => owners.others.push(name),
            Err(_) => {}
        }
    }
    owners
}

/// [`list_by_owner`]'s answer.
#[derive(Debug, Default)]
pub(crate) struct Owners {
    /// This user's objects.
    pub(crate) own: Vec<String>,
    /// Other users' objects.
    pub(crate) others: Vec<String>,
}

/// Types that may be referenced inside shared memory: `#[repr(C)]`, valid
/// for every bit pattern, and `Sync` (only atomics inside).
///
/// # Safety
/// Implementors must be valid for any bit pattern, contain no pointers, and
/// have every field that may change after publication be an atomic.
pub(crate) unsafe trait Shared: Sync {}

// SAFETY: atomics of plain integers are valid for any bit pattern.
unsafe impl Shared for AtomicU32 {}
// SAFETY: as above.
unsafe impl Shared for AtomicU64 {}

/// A mapping of (a part of) a shared-memory object; unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is process-shared memory; this type only hands out
// references to `Shared` types (atomics) and raw pointers whose use is
// governed by the GASPI contract, so moving or sharing the handle between
// threads cannot create a data race by itself.
unsafe impl Send for Mapping {}
// SAFETY: see `Send`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of `fd` from `offset` (page aligned), read-write and
    /// shared. With `populate` the pages are faulted in now rather than on
    /// first touch.
    pub(crate) fn new(
        fd: &OwnedFd,
        len: usize,
        offset: usize,
        populate: bool,
    ) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let mut flags = MapFlags::SHARED;
        if populate {
            flags |= MapFlags::POPULATE;
        }
        // SAFETY: a fresh mapping at an address the kernel chooses; fd is a
        // valid descriptor and no existing memory is replaced.
        let p =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, RW, flags, fd, offset as u64)? };
        Ok(Mapping {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// First byte of the mapping.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The `T` at byte `offset`. Panics if it does not fit or is misaligned
    /// (offsets come from our own layouts, so that is a bug, not bad input).
    pub(crate) fn at<T: Shared>(&self, offset: usize) -> &T {
        self.slice(offset, 1).first().expect("slice of one")
    }

    /// `count` consecutive `T`s from byte `offset`; panics like [`Mapping::at`].
    pub(crate) fn slice<T: Shared>(&self, offset: usize, count: usize) -> &[T] {
        let size = std::mem::size_of::<T>();
        let end = count
            .checked_mul(size)
            .and_then(|b| b.checked_add(offset))
            .expect("layout overflow");
        assert!(end <= self.len, "shared layout out of the mapping");
        assert_eq!(
            offset % std::mem::align_of::<T>(),
            0,
            "misaligned shared layout"
        );
        // SAFETY: the range is inside the mapping (checked above), aligned
        // for T, lives as long as &self, and T: Shared is valid for any bit
        // pattern and only mutated through atomics.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset).cast::<T>(), count) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping created by Mapping::new and not
        // unmapped elsewhere; references into it borrow self, so none outlive it.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// User memory rebound onto a shared-memory object (`segment_bind`).
///
/// The pages at `addr` are replaced, in place, by a shared mapping of the
/// object holding the same bytes, so the user's pointer stays valid and other
/// ranks can map the object. On drop the pages become private anonymous
/// memory again with their current content.
#[derive(Debug)]
pub(crate) struct BoundRegion {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: same reasoning as for Mapping.
unsafe impl Send for BoundRegion {}
// SAFETY: same reasoning as for Mapping.
unsafe impl Sync for BoundRegion {}

impl BoundRegion {
    /// Copy the bytes at `addr..addr+len` into `fd` at `offset` (page
    /// aligned, inside the object), then map `fd` over that range.
    ///
    /// # Safety
    /// `addr` and `len` must be page aligned and describe memory owned by the
    /// caller (heap or anonymous mappings), not accessed by other threads
    /// during the call, and valid until this value is dropped.
    pub(crate) unsafe fn bind(
        fd: &OwnedFd,
        offset: usize,
        addr: *mut u8,
        len: usize,
    ) -> io::Result<BoundRegion> {
        let page = page_size();
        let addr_nn =
            NonNull::new(addr).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        if len == 0 || addr as usize % page != 0 || len % page != 0 || offset % page != 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let staging = Mapping::new(fd, len, offset, false)?;
        // SAFETY: the caller guarantees addr..addr+len is readable and not
        // being written; staging maps exactly len bytes.
        unsafe { std::ptr::copy_nonoverlapping(addr, staging.ptr(), len) };
        drop(staging);
        // SAFETY: replaces exactly the caller's page-aligned range, which the
        // caller owns, with a shared mapping of the same size.
        unsafe {
            rustix::mm::mmap(
                addr.cast::<c_void>(),
                len,
                RW,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                offset as u64,
            )?
        };
        Ok(BoundRegion { addr: addr_nn, len })
    }

    /// First byte of the user's memory.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.addr.as_ptr()
    }
}

impl Drop for BoundRegion {
    fn drop(&mut self) {
        // Give the user back private memory with the current content, a
        // chunk at a time so the temporary copy stays small.
        const CHUNK: usize = 16 << 20;
        let mut tmp = vec![0u8; CHUNK.min(self.len)];
        let mut done = 0;
        while done < self.len {
            let n = CHUNK.min(self.len - done);
            // SAFETY: addr+done..+n is inside the bound range, mapped shared.
            let at = unsafe { self.addr.as_ptr().add(done) };
            // SAFETY: reading n bytes of the mapped range into tmp.
            unsafe { std::ptr::copy_nonoverlapping(at, tmp.as_mut_ptr(), n) };
            // SAFETY: replaces n bytes of the bound range (page multiples,
            // since CHUNK and len are) with fresh private anonymous pages.
            let p = unsafe {
                rustix::mm::mmap_anonymous(
                    at.cast::<c_void>(),
                    n,
                    RW,
                    MapFlags::PRIVATE | MapFlags::FIXED,
                )
            };
            if p.is_ok() {
                // SAFETY: the range is mapped again, private and writable.
                unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), at, n) };
            }
            done += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(tag: &str) -> String {
        format!("gaspi.unit.{}.{tag}", std::process::id())
    }

    #[test]
    fn create_map_share_unlink() {
        let n = name("a");
        let fd = create(&n, 8192).unwrap();
        assert_eq!(
            create(&n, 8192).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        let m1 = Mapping::new(&fd, 8192, 0, true).unwrap();
        let (fd2, size) = open(&n).unwrap();
        assert_eq!(size, 8192);
        let m2 = Mapping::new(&fd2, 8192, 0, false).unwrap();
        m1.at::<AtomicU64>(64)
            .store(42, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            m2.at::<AtomicU64>(64)
                .load(std::sync::atomic::Ordering::SeqCst),
            42
        );
        unlink(&n).unwrap();
        assert!(open(&n).is_err());
        // still mapped after unlink
        assert_eq!(
            m2.at::<AtomicU64>(64)
                .load(std::sync::atomic::Ordering::SeqCst),
            42
        );
    }

    #[test]
    fn bind_keeps_content_and_shares_it() {
        let page = page_size();
        let n = name("b");
        let fd = create(&n, 4 * page).unwrap();
        let obj = Mapping::new(&fd, 4 * page, 0, false).unwrap();
        let layout = std::alloc::Layout::from_size_align(2 * page, page).unwrap();
        // SAFETY: non-zero size layout.
        let user = unsafe { std::alloc::alloc_zeroed(layout) };
        // SAFETY: user points to 2 pages we own.
        unsafe { user.add(10).write(7) };
        // SAFETY: page aligned memory we own, no other users.
        let region = unsafe { BoundRegion::bind(&fd, page, user, 2 * page) }.unwrap();
        // SAFETY: reading/writing our own bound memory and its object view.
        unsafe {
            assert_eq!(obj.ptr().add(page + 10).read(), 7);
            obj.ptr().add(page + 11).write(9);
            assert_eq!(user.add(11).read(), 9);
        }
        drop(region);
        // SAFETY: memory is private again and still ours.
        unsafe {
            assert_eq!(user.add(11).read(), 9);
            obj.ptr().add(page + 12).write(5);
            assert_eq!(user.add(12).read(), 0);
            std::alloc::dealloc(user, layout);
        }
        unlink(&n).unwrap();
    }
}
