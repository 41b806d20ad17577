//! Raw bindings to GPI-2, the GASPI reference implementation: `GASPI.h`
//! and `GASPI_Ext.h` of GPI-2 1.5 and 1.6, written by hand from the
//! headers (no bindgen, so nothing but a C toolchain-free Rust build is
//! needed). The safe API is the `gaspi` crate; this crate only declares.
//!
//! # Finding GPI-2
//! The build script looks for an installed GPI-2 (it never builds one):
//! `GPI2_DIR`, then pkg-config `GPI2`, then `/opt/GPI2`, `/opt/gpi2`,
//! `$HOME/GPI2`, `/usr/local`, `/usr`; the error lists every place it
//! looked. Feature `debug` (or `GPI2_DEBUG=1`) links `libGPI2-dbg`, which
//! checks arguments. With `DOCS_RS` set it links nothing (documentation).
//!
//! # What differs between the versions
//! Only `gaspi_config_t`: 1.6 added the libfabric (`ofi`) parameters to
//! [`gaspi_dev_config_t`] and [`GASPI_OFI`]; the build script picks the
//! layout of the installed version.
//!
//! # Constants
//! `GASPI_BLOCK`, `GASPI_TEST` and `GASPI_GROUP_ALL` are `static const`
//! in the header (no symbols to link): they are reproduced here. C enums
//! are `c_int` type aliases with one constant per value.
//!
//! # Licence
//! GPI-2 is GPL-3: a binary linked with it is subject to the GPL-3.
//!
//! ```no_run
//! use gpi2_sys::*;
//! // SAFETY: out pointers to locals; GPI-2 used from this thread only.
//! unsafe {
//!     assert_eq!(gaspi_proc_init(GASPI_BLOCK), GASPI_SUCCESS);
//!     let mut rank: gaspi_rank_t = 0;
//!     gaspi_proc_rank(&mut rank);
//!     gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK);
//!     gaspi_proc_term(GASPI_BLOCK);
//! }
//! ```
#![allow(non_camel_case_types)]

#[allow(unused_imports)]
use std::os::raw::c_ulong;
use std::os::raw::{c_char, c_int, c_void};

pub type gaspi_char = c_char;
pub type gaspi_uchar = u8;
pub type gaspi_short = i16;
pub type gaspi_ushort = u16;
pub type gaspi_int = c_int;
pub type gaspi_uint = u32;
pub type gaspi_long = i64;
pub type gaspi_ulong = u64;
pub type gaspi_float = f32;
pub type gaspi_double = f64;
pub type gaspi_timeout_t = u64;
pub type gaspi_rank_t = u16;
pub type gaspi_group_t = u8;
pub type gaspi_number_t = u32;
pub type gaspi_pointer_t = *mut c_void;
pub type gaspi_reduce_state_t = *mut c_void;
pub type gaspi_queue_id_t = u8;
pub type gaspi_size_t = u64;
pub type gaspi_segment_id_t = u8;
pub type gaspi_offset_t = u64;
pub type gaspi_atomic_value_t = u64;
pub type gaspi_time_t = f32;
pub type gaspi_cycles_t = u64;
pub type gaspi_notification_id_t = u32;
pub type gaspi_notification_t = u32;
pub type gaspi_statistic_counter_t = u32;
pub type gaspi_string_t = *mut c_char;
pub type gaspi_memory_description_t = c_int;

/// `static const` in the header.
pub const GASPI_GROUP_ALL: gaspi_group_t = 0;
/// `static const` in the header: wait without limit.
pub const GASPI_BLOCK: gaspi_timeout_t = 0xffff_ffff_ffff_ffff;
/// `static const` in the header: do not wait.
pub const GASPI_TEST: gaspi_timeout_t = 0;

/// `gaspi_return_t` (a C enum).
pub type gaspi_return_t = c_int;
pub const GASPI_ERROR: gaspi_return_t = -1;
pub const GASPI_SUCCESS: gaspi_return_t = 0;
pub const GASPI_TIMEOUT: gaspi_return_t = 1;
pub const GASPI_ERR_EMFILE: gaspi_return_t = 2;
pub const GASPI_ERR_ENV: gaspi_return_t = 3;
pub const GASPI_ERR_SN_PORT: gaspi_return_t = 4;
pub const GASPI_ERR_CONFIG: gaspi_return_t = 5;
pub const GASPI_ERR_NOINIT: gaspi_return_t = 6;
pub const GASPI_ERR_INITED: gaspi_return_t = 7;
pub const GASPI_ERR_NULLPTR: gaspi_return_t = 8;
pub const GASPI_ERR_INV_SEGSIZE: gaspi_return_t = 9;
pub const GASPI_ERR_INV_SEG: gaspi_return_t = 10;
pub const GASPI_ERR_INV_GROUP: gaspi_return_t = 11;
pub const GASPI_ERR_INV_RANK: gaspi_return_t = 12;
pub const GASPI_ERR_INV_QUEUE: gaspi_return_t = 13;
pub const GASPI_ERR_INV_LOC_OFF: gaspi_return_t = 14;
pub const GASPI_ERR_INV_REM_OFF: gaspi_return_t = 15;
pub const GASPI_ERR_INV_COMMSIZE: gaspi_return_t = 16;
pub const GASPI_ERR_INV_NOTIF_VAL: gaspi_return_t = 17;
pub const GASPI_ERR_INV_NOTIF_ID: gaspi_return_t = 18;
pub const GASPI_ERR_INV_NUM: gaspi_return_t = 19;
pub const GASPI_ERR_INV_SIZE: gaspi_return_t = 20;
pub const GASPI_ERR_MANY_SEG: gaspi_return_t = 21;
pub const GASPI_ERR_MANY_GRP: gaspi_return_t = 22;
pub const GASPI_QUEUE_FULL: gaspi_return_t = 23;
pub const GASPI_ERR_UNALIGN_OFF: gaspi_return_t = 24;
pub const GASPI_ERR_ACTIVE_COLL: gaspi_return_t = 25;
pub const GASPI_ERR_DEVICE: gaspi_return_t = 26;
pub const GASPI_ERR_SN: gaspi_return_t = 27;
pub const GASPI_ERR_MEMALLOC: gaspi_return_t = 28;

/// The name of a return code, as in the header (`None` if unknown).
pub fn return_name(code: gaspi_return_t) -> Option<&'static str> {
    const NAMES: [&str; 30] = [
        "GASPI_ERROR",
        "GASPI_SUCCESS",
        "GASPI_TIMEOUT",
        "GASPI_ERR_EMFILE",
        "GASPI_ERR_ENV",
        "GASPI_ERR_SN_PORT",
        "GASPI_ERR_CONFIG",
        "GASPI_ERR_NOINIT",
        "GASPI_ERR_INITED",
        "GASPI_ERR_NULLPTR",
        "GASPI_ERR_INV_SEGSIZE",
        "GASPI_ERR_INV_SEG",
        "GASPI_ERR_INV_GROUP",
        "GASPI_ERR_INV_RANK",
        "GASPI_ERR_INV_QUEUE",
        "GASPI_ERR_INV_LOC_OFF",
        "GASPI_ERR_INV_REM_OFF",
        "GASPI_ERR_INV_COMMSIZE",
        "GASPI_ERR_INV_NOTIF_VAL",
        "GASPI_ERR_INV_NOTIF_ID",
        "GASPI_ERR_INV_NUM",
        "GASPI_ERR_INV_SIZE",
        "GASPI_ERR_MANY_SEG",
        "GASPI_ERR_MANY_GRP",
        "GASPI_QUEUE_FULL",
        "GASPI_ERR_UNALIGN_OFF",
        "GASPI_ERR_ACTIVE_COLL",
        "GASPI_ERR_DEVICE",
        "GASPI_ERR_SN",
        "GASPI_ERR_MEMALLOC",
    ];
    usize::try_from(code + 1)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
}

/// `gaspi_operation_t`.
pub type gaspi_operation_t = c_int;
pub const GASPI_OP_MIN: gaspi_operation_t = 0;
pub const GASPI_OP_MAX: gaspi_operation_t = 1;
pub const GASPI_OP_SUM: gaspi_operation_t = 2;

/// `gaspi_datatype_t`.
pub type gaspi_datatype_t = c_int;
pub const GASPI_TYPE_INT: gaspi_datatype_t = 0;
pub const GASPI_TYPE_UINT: gaspi_datatype_t = 1;
pub const GASPI_TYPE_FLOAT: gaspi_datatype_t = 2;
pub const GASPI_TYPE_DOUBLE: gaspi_datatype_t = 3;
pub const GASPI_TYPE_LONG: gaspi_datatype_t = 4;
pub const GASPI_TYPE_ULONG: gaspi_datatype_t = 5;

/// `gaspi_reduce_operation_t`: a user reduction for `gaspi_allreduce_user`.
pub type gaspi_reduce_operation_t = Option<
    unsafe extern "C" fn(
        operand_one: gaspi_pointer_t,
        operand_two: gaspi_pointer_t,
        result: gaspi_pointer_t,
        state: gaspi_reduce_state_t,
        num: gaspi_number_t,
        element_size: gaspi_size_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t,
>;

/// `gaspi_network_t`.
pub type gaspi_network_t = c_int;
pub const GASPI_IB: gaspi_network_t = 0;
pub const GASPI_ROCE: gaspi_network_t = 1;
pub const GASPI_ETHERNET: gaspi_network_t = 2;
pub const GASPI_GEMINI: gaspi_network_t = 3;
pub const GASPI_ARIES: gaspi_network_t = 4;
/// Libfabric (GPI-2 1.6).
pub const GASPI_OFI: gaspi_network_t = 5;

/// InfiniBand parameters of [`gaspi_dev_config_t`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct gaspi_dev_ib_t {
    pub netdev_id: gaspi_int,
    pub mtu: gaspi_uint,
    pub port_check: gaspi_uint,
}

/// TCP parameters of [`gaspi_dev_config_t`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct gaspi_dev_tcp_t {
    pub port: gaspi_uint,
}

/// Libfabric parameters of [`gaspi_dev_config_t`] (GPI-2 1.6).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct gaspi_dev_ofi_t {
    pub use_shm: c_int,
    pub provider_info: c_int,
    pub progress_auto: c_int,
}

/// The anonymous `params` struct of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct gaspi_dev_params_t {
    pub ib: gaspi_dev_ib_t,
    pub tcp: gaspi_dev_tcp_t,
    #[cfg(gpi2_1_6)]
    pub ofi: gaspi_dev_ofi_t,
}

/// `gaspi_dev_config_t` (the installed version's layout).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct gaspi_dev_config_t {
    pub network_type: gaspi_network_t,
    pub params: gaspi_dev_params_t,
}

/// `gaspi_alloc_t`.
pub type gaspi_alloc_t = c_int;
pub const GASPI_MEM_UNINITIALIZED: gaspi_alloc_t = 0;
pub const GASPI_MEM_INITIALIZED: gaspi_alloc_t = 1;
pub const GASPI_ALLOC_DEFAULT: gaspi_alloc_t = GASPI_MEM_UNINITIALIZED;

/// `gaspi_state_t`.
pub type gaspi_state_t = c_int;
pub const GASPI_STATE_HEALTHY: gaspi_state_t = 0;
pub const GASPI_STATE_CORRUPT: gaspi_state_t = 1;
/// An array of one [`gaspi_state_t`] per rank.
pub type gaspi_state_vector_t = *mut gaspi_state_t;

/// `gaspi_statistic_argument_t`.
pub type gaspi_statistic_argument_t = c_int;
pub const GASPI_STATISTIC_ARGUMENT_NONE: gaspi_statistic_argument_t = 0;
pub const GASPI_STATISTIC_ARGUMENT_RANK: gaspi_statistic_argument_t = 1;

/// `gaspi_topology_t`.
pub type gaspi_topology_t = c_int;
pub const GASPI_TOPOLOGY_NONE: gaspi_topology_t = 0;
pub const GASPI_TOPOLOGY_STATIC: gaspi_topology_t = 1;
pub const GASPI_TOPOLOGY_DYNAMIC: gaspi_topology_t = 2;

/// `gaspi_config_t` (the installed version's layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct gaspi_config_t {
    pub logger: gaspi_uint,
    pub sn_port: gaspi_uint,
    pub net_info: gaspi_uint,
    pub user_net: gaspi_uint,
    pub sn_persistent: gaspi_int,
    pub sn_timeout: gaspi_timeout_t,
    pub dev_config: gaspi_dev_config_t,
    pub network: gaspi_network_t,
    pub queue_size_max: gaspi_uint,
    pub queue_num: gaspi_uint,
    pub group_max: gaspi_number_t,
    pub segment_max: gaspi_number_t,
    pub transfer_size_max: gaspi_size_t,
    pub notification_num: gaspi_number_t,
    pub passive_queue_size_max: gaspi_number_t,
    pub passive_transfer_size_max: gaspi_number_t,
    pub allreduce_buf_size: gaspi_size_t,
    pub allreduce_elem_max: gaspi_number_t,
    pub rw_list_elem_max: gaspi_number_t,
    pub build_infrastructure: gaspi_topology_t,
    pub user_defined: *mut c_void,
}

unsafe extern "C" {
    pub fn gaspi_config_get(config: *mut gaspi_config_t) -> gaspi_return_t;
    pub fn gaspi_config_set(new_config: gaspi_config_t) -> gaspi_return_t;
    pub fn gaspi_version(version: *mut f32) -> gaspi_return_t;
    pub fn gaspi_proc_init(timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_proc_term(timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_proc_rank(rank: *mut gaspi_rank_t) -> gaspi_return_t;
    pub fn gaspi_proc_num(proc_num: *mut gaspi_rank_t) -> gaspi_return_t;
    pub fn gaspi_proc_kill(rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_connect(rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_disconnect(rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_group_create(group: *mut gaspi_group_t) -> gaspi_return_t;
    pub fn gaspi_group_delete(group: gaspi_group_t) -> gaspi_return_t;
    pub fn gaspi_group_add(group: gaspi_group_t, rank: gaspi_rank_t) -> gaspi_return_t;
    pub fn gaspi_group_commit(group: gaspi_group_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_group_num(group_num: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_group_size(
        group: gaspi_group_t,
        group_size: *mut gaspi_number_t,
    ) -> gaspi_return_t;
    pub fn gaspi_group_ranks(
        group: gaspi_group_t,
        group_ranks: *mut gaspi_rank_t,
    ) -> gaspi_return_t;
    pub fn gaspi_group_max(group_max: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_segment_alloc(
        segment_id: gaspi_segment_id_t,
        size: gaspi_size_t,
        alloc_policy: gaspi_alloc_t,
    ) -> gaspi_return_t;
    pub fn gaspi_segment_delete(segment_id: gaspi_segment_id_t) -> gaspi_return_t;
    pub fn gaspi_segment_register(
        segment_id: gaspi_segment_id_t,
        rank: gaspi_rank_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_segment_create(
        segment_id: gaspi_segment_id_t,
        size: gaspi_size_t,
        group: gaspi_group_t,
        timeout_ms: gaspi_timeout_t,
        alloc_policy: gaspi_alloc_t,
    ) -> gaspi_return_t;
    pub fn gaspi_segment_bind(
        segment_id: gaspi_segment_id_t,
        pointer: gaspi_pointer_t,
        size: gaspi_size_t,
        memory_description: gaspi_memory_description_t,
    ) -> gaspi_return_t;
    pub fn gaspi_segment_use(
        segment_id: gaspi_segment_id_t,
        pointer: gaspi_pointer_t,
        size: gaspi_size_t,
        group: gaspi_group_t,
        timeout: gaspi_timeout_t,
        memory_description: gaspi_memory_description_t,
    ) -> gaspi_return_t;
    pub fn gaspi_segment_num(segment_num: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_segment_list(
        num: gaspi_number_t,
        segment_id_list: *mut gaspi_segment_id_t,
    ) -> gaspi_return_t;
    pub fn gaspi_segment_ptr(
        segment_id: gaspi_segment_id_t,
        ptr: *mut gaspi_pointer_t,
    ) -> gaspi_return_t;
    pub fn gaspi_segment_max(segment_max: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_write(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_read(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_write_list(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_read_list(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_wait(queue: gaspi_queue_id_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_barrier(group: gaspi_group_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_allreduce(
        buffer_send: gaspi_pointer_t,
        buffer_receive: gaspi_pointer_t,
        num: gaspi_number_t,
        operation: gaspi_operation_t,
        datatype: gaspi_datatype_t,
        group: gaspi_group_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_allreduce_user(
        buffer_send: gaspi_pointer_t,
        buffer_receive: gaspi_pointer_t,
        num: gaspi_number_t,
        element_size: gaspi_size_t,
        reduce_operation: gaspi_reduce_operation_t,
        reduce_state: gaspi_reduce_state_t,
        group: gaspi_group_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_atomic_fetch_add(
        segment_id: gaspi_segment_id_t,
        offset: gaspi_offset_t,
        rank: gaspi_rank_t,
        val_add: gaspi_atomic_value_t,
        val_old: *mut gaspi_atomic_value_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_atomic_compare_swap(
        segment_id: gaspi_segment_id_t,
        offset: gaspi_offset_t,
        rank: gaspi_rank_t,
        comparator: gaspi_atomic_value_t,
        val_new: gaspi_atomic_value_t,
        val_old: *mut gaspi_atomic_value_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_passive_send(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        size: gaspi_size_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_passive_receive(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rem_rank: *mut gaspi_rank_t,
        size: gaspi_size_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_notify(
        segment_id_remote: gaspi_segment_id_t,
        rank: gaspi_rank_t,
        notification_id: gaspi_notification_id_t,
        notification_value: gaspi_notification_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_notify_waitsome(
        segment_id_local: gaspi_segment_id_t,
        notification_begin: gaspi_notification_id_t,
        num: gaspi_number_t,
        first_id: *mut gaspi_notification_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_notify_reset(
        segment_id_local: gaspi_segment_id_t,
        notification_id: gaspi_notification_id_t,
        old_notification_val: *mut gaspi_notification_t,
    ) -> gaspi_return_t;
    pub fn gaspi_write_notify(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        notification_id: gaspi_notification_id_t,
        notification_value: gaspi_notification_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_write_list_notify(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        segment_id_notification: gaspi_segment_id_t,
        notification_id: gaspi_notification_id_t,
        notification_value: gaspi_notification_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_read_notify(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        notification_id: gaspi_notification_id_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_read_list_notify(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        segment_id_notification: gaspi_segment_id_t,
        notification_id: gaspi_notification_id_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_queue_purge(
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_queue_size(
        queue: gaspi_queue_id_t,
        queue_size: *mut gaspi_number_t,
    ) -> gaspi_return_t;
    pub fn gaspi_queue_num(queue_num: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_queue_size_max(queue_size_max: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_queue_create(
        queue: *mut gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t;
    pub fn gaspi_queue_delete(queue: gaspi_queue_id_t) -> gaspi_return_t;
    pub fn gaspi_transfer_size_min(transfer_size_min: *mut gaspi_size_t) -> gaspi_return_t;
    pub fn gaspi_transfer_size_max(transfer_size_max: *mut gaspi_size_t) -> gaspi_return_t;
    pub fn gaspi_notification_num(notification_num: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_passive_transfer_size_min(
        passive_transfer_size_min: *mut gaspi_size_t,
    ) -> gaspi_return_t;
    pub fn gaspi_passive_transfer_size_max(
        passive_transfer_size_max: *mut gaspi_size_t,
    ) -> gaspi_return_t;
    pub fn gaspi_atomic_max(max_value: *mut gaspi_atomic_value_t) -> gaspi_return_t;
    pub fn gaspi_allreduce_buf_size(buf_size: *mut gaspi_size_t) -> gaspi_return_t;
    pub fn gaspi_allreduce_elem_max(elem_max: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_queue_max(queue_max: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_network_type(network_type: *mut gaspi_network_t) -> gaspi_return_t;
    pub fn gaspi_build_infrastructure(build: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_time_ticks(ticks: *mut gaspi_cycles_t) -> gaspi_return_t;
    pub fn gaspi_time_get(wtime: *mut gaspi_time_t) -> gaspi_return_t;
    pub fn gaspi_print_error(
        error_code: gaspi_return_t,
        error_message: *mut gaspi_string_t,
    ) -> gaspi_return_t;
    pub fn gaspi_state_vec_get(state_vector: gaspi_state_vector_t) -> gaspi_return_t;
    pub fn gaspi_statistic_verbosity_level(_verbosity_level: gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_statistic_counter_max(counter_max: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_statistic_counter_info(
        counter: gaspi_statistic_counter_t,
        counter_argument: *mut gaspi_statistic_argument_t,
        counter_name: *mut gaspi_string_t,
        counter_description: *mut gaspi_string_t,
        verbosity_level: *mut gaspi_number_t,
    ) -> gaspi_return_t;
    pub fn gaspi_statistic_counter_get(
        counter: gaspi_statistic_counter_t,
        argument: gaspi_number_t,
        value: *mut c_ulong,
    ) -> gaspi_return_t;
    pub fn gaspi_statistic_counter_reset(counter: gaspi_statistic_counter_t) -> gaspi_return_t;

    // GASPI_Ext.h
    pub fn gaspi_initialized(initialized: *mut gaspi_number_t) -> gaspi_return_t;
    pub fn gaspi_proc_local_rank(local_rank: *mut gaspi_rank_t) -> gaspi_return_t;
    pub fn gaspi_proc_local_num(local_num: *mut gaspi_rank_t) -> gaspi_return_t;
    pub fn gaspi_cpu_frequency(cpu_mhz: *mut gaspi_float) -> gaspi_return_t;
    pub fn gaspi_numa_socket(socket: *mut gaspi_uchar) -> gaspi_return_t;
    pub fn gaspi_set_socket_affinity(socket: gaspi_uchar) -> gaspi_return_t;
    pub fn gaspi_proc_ping(rank: gaspi_rank_t, tout: gaspi_timeout_t) -> gaspi_return_t;
    pub fn gaspi_segment_avail_local(avail_seg_id: *mut gaspi_segment_id_t) -> gaspi_return_t;
    pub fn gaspi_segment_size(
        segment_id: gaspi_segment_id_t,
        rank: gaspi_rank_t,
        size: *mut gaspi_size_t,
    ) -> gaspi_return_t;
    pub fn gaspi_rw_list_elem_max(elem_max: *mut gaspi_number_t) -> gaspi_return_t;

}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_names_match_the_header() {
        assert_eq!(return_name(GASPI_ERROR), Some("GASPI_ERROR"));
        assert_eq!(return_name(GASPI_QUEUE_FULL), Some("GASPI_QUEUE_FULL"));
        assert_eq!(return_name(GASPI_ERR_MEMALLOC), Some("GASPI_ERR_MEMALLOC"));
        assert_eq!(return_name(29), None);
        assert_eq!(return_name(-2), None);
    }

    /// Calls that need no job: the library links and answers.
    #[test]
    fn the_library_links_and_answers_without_a_job() {
        let mut v = 0f32;
        // SAFETY: a valid out pointer.
        assert_eq!(unsafe { gaspi_version(&mut v) }, GASPI_SUCCESS);
        assert!((1.5..1.7).contains(&v), "GPI-2 version {v}");
        let mut init = 1;
        // SAFETY: a valid out pointer.
        assert_eq!(unsafe { gaspi_initialized(&mut init) }, GASPI_SUCCESS);
        assert_eq!(init, 0);
    }
}
