"""The ZFS kernel module's parameters, as documented in zfs(4) of OpenZFS 2.3.0-2.3.9
(man/man4/zfs.4: "NAME = default (type)"), and the rules of zfs_module_params (validation runs
`check` and the nested type check in TYPES before any host is touched). The kernel takes integers
only for the numeric ones: no unit suffixes ("4G"), no fractions; writing an unknown name to
/sys/module/zfs/parameters fails and modprobe ignores it. Pure: no pyinfra.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.checking import Context, close, is_int, kind_of
from model.hostdata import HostConfig
from model.zfs_properties import parse_size

# Numeric parameters the kernel reads as unsigned (uint: 32 bits; u64, ulong: 64 bits).
UNSIGNED = frozenset(
    """
    dbuf_cache_hiwater_pct dbuf_cache_lowater_pct dbuf_cache_max_bytes dbuf_cache_shift
    dbuf_metadata_cache_max_bytes dbuf_metadata_cache_shift dbuf_mutex_cache_shift dmu_ddt_copies
    dmu_object_alloc_chunk_shift dmu_prefetch_max l2arc_feed_min_ms l2arc_feed_secs l2arc_headroom
    l2arc_headroom_boost l2arc_meta_percent l2arc_rebuild_blocks_min_l2size l2arc_trim_ahead
    l2arc_write_boost l2arc_write_max metaslab_aliquot metaslab_df_max_search metaslab_force_ganging
    metaslab_force_ganging_pct metaslab_preload_limit metaslab_preload_pct metaslab_unload_delay
    metaslab_unload_delay_ms raidz_expand_max_copy_bytes raidz_expand_max_reflow_bytes
    raidz_io_aggregate_rows spa_asize_inflation spa_load_verify_shift spa_upgrade_errlog_limit
    vdev_file_logical_ashift vdev_file_physical_ashift vdev_removal_max_span zfetch_max_distance
    zfetch_max_idistance zfetch_max_reorder zfetch_max_sec_reap zfetch_max_streams
    zfetch_min_distance zfetch_min_sec_reap zfs_abd_scatter_max_order zfs_abd_scatter_min_size
    zfs_arc_average_blocksize zfs_arc_dnode_limit zfs_arc_dnode_limit_percent
    zfs_arc_dnode_reduce_percent zfs_arc_evict_batch_limit zfs_arc_eviction_pct zfs_arc_grow_retry
    zfs_arc_max zfs_arc_meta_balance zfs_arc_min zfs_arc_min_prefetch_ms
    zfs_arc_min_prescient_prefetch_ms zfs_arc_pc_percent zfs_arc_shrink_shift zfs_arc_sys_free
    zfs_async_block_max_blocks zfs_btree_verify_intensity zfs_checksum_events_per_second
    zfs_commit_timeout_pct zfs_condense_indirect_obsolete_pct zfs_condense_max_obsolete_bytes
    zfs_condense_min_mapping_bytes zfs_dbgmsg_maxsize zfs_deadman_checktime_ms
    zfs_deadman_synctime_ms zfs_deadman_ziotime_ms zfs_dedup_log_cap zfs_dedup_log_flush_entries_max
    zfs_dedup_log_flush_entries_min zfs_dedup_log_flush_flow_rate_txgs
    zfs_dedup_log_flush_min_time_ms zfs_dedup_log_flush_passes_max zfs_dedup_log_flush_txgs
    zfs_dedup_log_hard_cap zfs_dedup_log_mem_max zfs_dedup_log_mem_max_percent zfs_dedup_log_txg_max
    zfs_delay_min_dirty_percent zfs_delete_blocks zfs_dio_write_verify_events_per_second
    zfs_dirty_data_max_max_percent zfs_dirty_data_max_percent zfs_dirty_data_sync_percent
    zfs_embedded_slog_min_ms zfs_fallocate_reserve_percent zfs_free_min_time_ms
    zfs_history_output_max zfs_initialize_chunk_size zfs_initialize_value zfs_key_max_salt_uses
    zfs_livelist_max_entries zfs_lua_max_instrlimit zfs_lua_max_memlimit zfs_max_async_dedup_frees
    zfs_max_log_walking zfs_max_logsm_summary_length zfs_max_nvlist_src_size zfs_max_recordsize
    zfs_metaslab_find_max_tries zfs_metaslab_fragmentation_threshold zfs_metaslab_max_size_cache_sec
    zfs_metaslab_mem_limit zfs_mg_fragmentation_threshold zfs_mg_noalloc_threshold
    zfs_min_metaslabs_to_flush zfs_multihost_fail_intervals zfs_multihost_history
    zfs_multihost_import_intervals zfs_multihost_interval zfs_multilist_num_sublists
    zfs_object_mutex_size zfs_obsolete_min_time_ms zfs_override_estimate_recordsize
    zfs_per_txg_dirty_frees_percent zfs_read_history zfs_rebuild_max_segment zfs_rebuild_vdev_limit
    zfs_recv_queue_ff zfs_recv_queue_length zfs_recv_write_batch_size zfs_removal_suspend_progress
    zfs_remove_max_segment zfs_resilver_defer_percent zfs_resilver_min_time_ms
    zfs_scan_checkpoint_intval zfs_scan_fill_weight zfs_scan_issue_strategy zfs_scan_mem_lim_fact
    zfs_scan_mem_lim_soft_fact zfs_scan_report_txgs zfs_scrub_error_blocks_per_txg
    zfs_scrub_min_time_ms zfs_send_no_prefetch_queue_ff zfs_send_no_prefetch_queue_length
    zfs_send_queue_ff zfs_send_queue_length zfs_special_class_metadata_reserve_pct
    zfs_sync_pass_deferred_free zfs_sync_pass_dont_compress zfs_sync_pass_rewrite
    zfs_traverse_indirect_prefetch_limit zfs_trim_extent_bytes_max zfs_trim_extent_bytes_min
    zfs_trim_metaslab_skip zfs_trim_queue_limit zfs_trim_txg_batch zfs_txg_history zfs_txg_timeout
    zfs_unflushed_log_block_max zfs_unflushed_log_block_min zfs_unflushed_log_block_pct
    zfs_unflushed_log_txg_max zfs_unflushed_max_mem_amt zfs_unflushed_max_mem_ppm
    zfs_unlink_suspend_progress zfs_vdev_aggregation_limit zfs_vdev_aggregation_limit_non_rotating
    zfs_vdev_async_read_max_active zfs_vdev_async_read_min_active
    zfs_vdev_async_write_active_max_dirty_percent zfs_vdev_async_write_active_min_dirty_percent
    zfs_vdev_async_write_max_active zfs_vdev_async_write_min_active zfs_vdev_def_queue_depth
    zfs_vdev_default_ms_count zfs_vdev_default_ms_shift zfs_vdev_direct_write_verify
    zfs_vdev_disk_classic zfs_vdev_disk_max_segs zfs_vdev_failfast_mask
    zfs_vdev_initializing_max_active zfs_vdev_initializing_min_active zfs_vdev_max_active
    zfs_vdev_max_auto_ashift zfs_vdev_max_ms_shift zfs_vdev_min_auto_ashift zfs_vdev_min_ms_count
    zfs_vdev_ms_count_limit zfs_vdev_nia_credit zfs_vdev_nia_delay zfs_vdev_open_timeout_ms
    zfs_vdev_queue_depth_pct zfs_vdev_read_gap_limit zfs_vdev_rebuild_max_active
    zfs_vdev_rebuild_min_active zfs_vdev_removal_max_active zfs_vdev_removal_min_active
    zfs_vdev_scrub_max_active zfs_vdev_scrub_min_active zfs_vdev_sync_read_max_active
    zfs_vdev_sync_read_min_active zfs_vdev_sync_write_max_active zfs_vdev_sync_write_min_active
    zfs_vdev_trim_max_active zfs_vdev_trim_min_active zfs_vdev_write_gap_limit
    zfs_vnops_read_chunk_size zfs_zevent_len_max zil_maxblocksize zil_maxcopied zil_slog_bulk
    zio_taskq_batch_pct zio_taskq_batch_tpq zio_taskq_write_tpq zstd_abort_size zstd_earlyabort_pass
    zvol_blk_mq_blocks_per_thread zvol_blk_mq_queue_depth zvol_blk_mq_threads zvol_enforce_quotas
    zvol_inhibit_dev zvol_major zvol_num_taskqs zvol_prefetch_bytes zvol_request_sync zvol_threads
    zvol_use_blk_mq zvol_volmode
""".split()
)

# Numeric parameters the kernel reads as signed (int: 32 bits; long, s64: 64 bits).
SIGNED = frozenset(
    """
    brt_zap_default_bs brt_zap_default_ibs brt_zap_prefetch ddt_zap_default_bs ddt_zap_default_ibs
    ignore_hole_birth l2arc_exclude_special l2arc_feed_again l2arc_mfuonly l2arc_noprefetch
    l2arc_norw l2arc_rebuild_enabled metaslab_bias_enabled metaslab_debug_load metaslab_debug_unload
    metaslab_df_use_largest_segment metaslab_fragmentation_factor_enabled
    metaslab_lba_weighting_enabled metaslab_preload_enabled reference_history
    reference_tracking_enable send_holes_without_birth_time spa_cpus_per_allocator
    spa_load_print_vdev_tree spa_load_verify_data spa_load_verify_metadata spa_num_allocators
    spa_slop_shift vdev_validate_skip zap_iterate_prefetch zap_micro_max_size zap_shrink_enabled
    zfs_abd_scatter_enabled zfs_admin_snapshot zfs_allow_redacted_dataset_mount
    zfs_arc_evict_threads zfs_arc_lotsfree_percent zfs_arc_overflow_shift zfs_arc_prune_task_threads
    zfs_arc_shrinker_limit zfs_arc_shrinker_seeks zfs_autoimport_disable zfs_bclone_enabled
    zfs_bclone_wait_dirty zfs_condense_indirect_commit_entry_delay_ms
    zfs_condense_indirect_vdevs_enable zfs_dbgmsg_enable zfs_dbuf_state_index
    zfs_ddt_data_is_special zfs_deadman_enabled zfs_deadman_events_per_second zfs_dedup_prefetch
    zfs_default_bs zfs_default_ibs zfs_delay_scale zfs_delete_dentry zfs_delete_inode
    zfs_dio_enabled zfs_dirty_data_max zfs_dirty_data_max_max zfs_disable_ivset_guid_check
    zfs_dmu_offset_next_sync zfs_expire_snapshot zfs_flags zfs_free_bpobj_enabled
    zfs_free_leak_on_eio zfs_immediate_write_sz zfs_keep_log_spacemaps_at_export
    zfs_livelist_condense_new_alloc zfs_livelist_condense_sync_cancel
    zfs_livelist_condense_sync_pause zfs_livelist_condense_zthr_cancel
    zfs_livelist_condense_zthr_pause zfs_livelist_min_percent_shared zfs_max_dataset_nesting
    zfs_max_missing_tvds zfs_metaslab_segment_weight_enabled zfs_metaslab_switch_threshold
    zfs_metaslab_try_hard_before_gang zfs_no_scrub_io zfs_no_scrub_prefetch zfs_nocacheflush
    zfs_nopwrite_enabled zfs_pd_bytes_max zfs_prefetch_disable zfs_qat_checksum_disable
    zfs_qat_compress_disable zfs_qat_encrypt_disable zfs_read_history_hits zfs_rebuild_scrub_enabled
    zfs_reconstruct_indirect_combinations_max zfs_recover zfs_recv_best_effort_corrective
    zfs_removal_ignore_errors zfs_resilver_disable_defer zfs_scan_ignore_errors zfs_scan_legacy
    zfs_scan_max_ext_gap zfs_scan_strict_mem_lim zfs_scan_suspend_progress zfs_scan_vdev_limit
    zfs_scrub_after_expand zfs_send_corrupt_data zfs_send_unmodified_spill_blocks
    zfs_slow_io_events_per_second zfs_snapshot_no_setuid zfs_spa_discard_memory_limit
    zfs_user_indirect_is_special zfs_vdev_mirror_non_rotating_inc
    zfs_vdev_mirror_non_rotating_seek_inc zfs_vdev_mirror_rotating_inc
    zfs_vdev_mirror_rotating_seek_inc zfs_vdev_mirror_rotating_seek_offset zfs_wrlog_data_max
    zfs_xattr_compat zfs_zevent_retain_expire_secs zfs_zevent_retain_max
    zfs_zil_clean_taskq_maxalloc zfs_zil_clean_taskq_minalloc zfs_zil_clean_taskq_nthr_pct
    zfs_zil_saxattr zil_nocacheflush zil_replay_disable zio_deadman_log_all zio_dva_throttle_enabled
    zio_requeue_io_start_cut_in_line zio_slow_io_ms zvol_max_discard_blocks
""".split()
)

# String parameters (charp, string): implementation or policy names, not numbers.
TEXT = frozenset(
    """
    spa_config_path zfs_blake3_impl zfs_deadman_failmode zfs_fletcher_4_impl zfs_vdev_raidz_impl
    zfs_vdev_scheduler zio_taskq_free zio_taskq_read zio_taskq_write
""".split()
)

# The 64-bit ones among the numeric parameters (u64, ulong, long, s64); the others are 32 bits.
WIDE = frozenset(
    """
    dbuf_cache_max_bytes dbuf_metadata_cache_max_bytes l2arc_feed_min_ms l2arc_feed_secs
    l2arc_headroom l2arc_headroom_boost l2arc_rebuild_blocks_min_l2size l2arc_trim_ahead
    l2arc_write_boost l2arc_write_max metaslab_aliquot metaslab_force_ganging
    raidz_expand_max_copy_bytes raidz_expand_max_reflow_bytes raidz_io_aggregate_rows
    vdev_file_logical_ashift vdev_file_physical_ashift zfs_arc_dnode_limit
    zfs_arc_dnode_limit_percent zfs_arc_dnode_reduce_percent zfs_arc_max zfs_arc_min
    zfs_arc_sys_free zfs_async_block_max_blocks zfs_condense_max_obsolete_bytes
    zfs_condense_min_mapping_bytes zfs_deadman_checktime_ms zfs_deadman_synctime_ms
    zfs_deadman_ziotime_ms zfs_dedup_log_mem_max zfs_delete_blocks zfs_history_output_max
    zfs_immediate_write_sz zfs_initialize_chunk_size zfs_initialize_value zfs_key_max_salt_uses
    zfs_livelist_max_entries zfs_lua_max_instrlimit zfs_lua_max_memlimit zfs_max_async_dedup_frees
    zfs_max_log_walking zfs_max_logsm_summary_length zfs_max_nvlist_src_size
    zfs_metaslab_max_size_cache_sec zfs_min_metaslabs_to_flush zfs_multihost_interval
    zfs_per_txg_dirty_frees_percent zfs_rebuild_max_segment zfs_rebuild_vdev_limit
    zfs_unflushed_log_block_max zfs_unflushed_log_block_min zfs_unflushed_log_block_pct
    zfs_unflushed_log_txg_max zfs_unflushed_max_mem_amt zfs_unflushed_max_mem_ppm
    zfs_vnops_read_chunk_size zil_slog_bulk zvol_max_discard_blocks
""".split()
)


def integer_range(name: str) -> tuple[int, int]:
    """The values the kernel accepts for numeric parameter `name` (inclusive bounds)."""
    bits = 64 if name in WIDE else 32
    if name in SIGNED:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


# --- the rules of zfs_module_params (validation/checks.py runs them) ----------------------------


def type_zfs_module_params(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    good = True
    for param, setting in value.items():
        where = f"{key}[{param!r}]"
        if not isinstance(param, str):
            ctx.add(name, where, setting, "a parameter name must be a string", 'e.g. "zfs_txg_timeout"')
            good = False
        elif not is_int(setting):
            size = parse_size(setting) if isinstance(setting, str) else None
            fix = (
                f"write {size} (bytes)"
                if size is not None and not str(setting).isdigit()
                else "an integer in the parameter's unit, e.g. 4294967296 for 4 GiB"
            )
            if isinstance(setting, str) and setting.strip().isdigit():
                fix = f"write it as a number: {int(setting)}"
            ctx.add(
                name,
                where,
                setting,
                f"must be an integer, not {kind_of(setting)}: the kernel takes integers "
                "only (no unit suffixes, no fractions)",
                fix,
            )
            good = False
    return good


TYPES = {"zfs_module_params": type_zfs_module_params}


def check(ctx: Context, c: HostConfig) -> None:
    if not ctx.ok(c, "zfs_module_params"):
        return
    known = UNSIGNED | SIGNED
    for param, value in c.module_params.items():
        where = f"zfs_module_params[{param!r}]"
        if param in TEXT:
            ctx.add(
                c.name,
                where,
                value,
                "a string parameter of the zfs module; only numeric ones are set here",
                "remove it",
            )
        elif param not in known:
            hint = close(param, known)
            ctx.add(
                c.name,
                where,
                value,
                "not a parameter of the zfs module (zfs(4), OpenZFS 2.3)",
                f"did you mean one of {hint}?" if hint else "see man 4 zfs for the names",
            )
        else:
            low, high = integer_range(param)
            if not low <= value <= high:
                ctx.add(
                    c.name,
                    where,
                    value,
                    f"out of the parameter's range {low}..{high}",
                    "see man 4 zfs for its unit and meaning",
                )
