"""bench/variants.py: `tuned` is what the deploy renders, every other variant changes only
storage-related things, and the stock settings really are the servers' defaults (the installed
mariadbd and postgres read the variant configs)."""

import subprocess

import pytest

from bench import variants
from model.hostdata import DEFAULTS
from roles import render

from tests.unit.conftest import GIB, host_data
from tests.unit.real_servers import PG_BIN, as_postgres, mariadbd_values, require

# Debian 12: the servers installed on this machine read the variant configs (MariaDB 10.11, PostgreSQL
# 15); Debian 13's tuned settings are compared as rendered.
LAB_VM = {
    "hardware": {"ram_bytes": 4 * GIB, "cpus": 1},
    "drive_pattern": "nvme-TEST_*",
    "drive_count": 24,
    "debian_release": "12",
}
HOSTS = {
    "mariadb": host_data(**LAB_VM, role="primary", server_id=1, zpool_spares=2),
    "postgresql": host_data(**LAB_VM, role="primary"),
}


def by_name(engine):
    return {v.name: v for v in variants.variants(engine, HOSTS[engine])}


def test_each_engine_has_its_variants_tuned_first():
    assert list(by_name("mariadb")) == [
        "tuned",
        "zfs-defaults",
        "md-ext4",
        "tuned+doublewrite",
        "tuned+recordsize-128k",
        "tuned+primarycache-all",
    ]
    assert list(by_name("postgresql")) == [
        "tuned",
        "zfs-defaults",
        "md-ext4",
        "tuned+full_page_writes",
        "tuned+recordsize-128k",
    ]
    for engine in variants.ENGINES:
        for v in by_name(engine).values():
            assert v.engine == engine and v.storage in variants.STORAGE_KINDS
            assert v.description and "\n" not in v.description
    with pytest.raises(ValueError, match="engine one of"):
        variants.variants("oracle", HOSTS["mariadb"])


@pytest.mark.parametrize("engine", variants.ENGINES)
def test_tuned_is_what_the_deploy_converges(engine):
    tuned = by_name(engine)["tuned"]
    cfg = variants.host_config(engine, HOSTS[engine])
    assert tuned.datasets == cfg.datasets and list(tuned.datasets)[0] == cfg.parent_dataset
    assert tuned.datasets[cfg.parent_dataset]["compression"] == DEFAULTS["zfs_compression"]
    assert tuned.pool["properties"] == {"ashift": 12, "autoreplace": "on", "autotrim": "on"}
    assert tuned.pool["spares"] == (2 if engine == "mariadb" else 0)
    assert tuned.server_settings == {} and tuned.module_params == {}
    assert variants.variant_config(tuned, HOSTS[engine]) == variants.tuned_config(cfg)


def test_tuned_storage_settings_come_from_the_rendered_config():
    mariadb = variants.tuned_storage_settings(variants.host_config("mariadb", HOSTS["mariadb"]))
    assert mariadb["innodb_doublewrite"] == "0" and mariadb["innodb_flush_method"] == "fsync"  # 10.11
    on_13 = variants.host_config("mariadb", {**HOSTS["mariadb"], "debian_release": "13"})
    assert {
        k: v for k, v in variants.tuned_storage_settings(on_13).items() if "file" in k or "flush_m" in k
    } == {
        "innodb_data_file_buffering": "ON",
        "innodb_data_file_write_through": "OFF",
    }
    cfg = variants.host_config("mariadb", HOSTS["mariadb"])
    assert mariadb["innodb_io_capacity"] == str(cfg.sizing().database["innodb_io_capacity"])
    pg = variants.tuned_storage_settings(variants.host_config("postgresql", HOSTS["postgresql"]))
    assert pg["full_page_writes"] == "off" and pg["wal_init_zero"] == "off"


@pytest.mark.parametrize("engine", variants.ENGINES)
def test_the_other_variants_keep_the_memory_sizing_and_the_paths(engine):
    tuned = by_name(engine)["tuned"]
    sized = variants.host_config(engine, HOSTS[engine]).sizing().database
    memory = render.MARIADB_SIZE_KEYS if engine == "mariadb" else render.PG_SIZE_KEYS | {"max_connections"}
    tuned_settings = variants.config_settings(variants.variant_config(tuned, HOSTS[engine]))
    for v in by_name(engine).values():
        assert v.directories == tuned.directories
        assert set(v.server_settings) <= set(variants.STORAGE_SETTINGS[engine])
        assert set(v.module_params) <= set(variants.STORAGE_MODULE_PARAMS)
        settings = variants.config_settings(variants.variant_config(v, HOSTS[engine]))
        for key in memory & set(sized):
            assert settings[key] == tuned_settings[key], (v.name, key)


def test_zfs_defaults_sets_nothing_but_the_mountpoint():
    for engine in variants.ENGINES:
        v = by_name(engine)["zfs-defaults"]
        assert v.pool["properties"] == {} and v.pool["mirror_width"] == 2
        assert v.datasets == {"datastore": {"mountpoint": "/datastore"}}
        assert all(path.startswith("/datastore/") for path in v.directories.values())
        assert v.server_settings == dict.fromkeys(variants.STORAGE_SETTINGS[engine])
        assert v.module_params == {"zfs_prefetch_disable": None}


def test_md_ext4_is_raid10_over_the_same_mirrors_and_spares():
    v = by_name("mariadb")["md-ext4"]
    assert v.storage == "md-ext4" and v.datasets == {}
    assert v.pool["level"] == "10" and v.pool["layout"] == "n2" and v.pool["spares"] == 2
    assert v.pool["filesystem"] == "ext4" and v.pool["mount"]["mountpoint"] == "/datastore"
    assert v.server_settings == by_name("mariadb")["zfs-defaults"].server_settings
    with pytest.raises(ValueError, match="two-way mirrors"):
        variants.variants("mariadb", {**HOSTS["mariadb"], "zpool_mirror_width": 3})


def changed(tuned, variant):
    return {
        ds: {k: v for k, v in props.items() if tuned.datasets[ds].get(k) != v}
        for ds, props in variant.datasets.items()
        if props != tuned.datasets[ds]
    }


def test_each_ablation_puts_one_setting_back():
    maria, pg = by_name("mariadb"), by_name("postgresql")
    assert maria["tuned+doublewrite"].server_settings == {"innodb_doublewrite": "1"}
    assert maria["tuned+doublewrite"].datasets == maria["tuned"].datasets
    assert pg["tuned+full_page_writes"].server_settings == {"full_page_writes": "on"}
    assert changed(maria["tuned"], maria["tuned+recordsize-128k"]) == {
        "datastore/mysql": {"recordsize": "128k"}
    }
    assert changed(pg["tuned"], pg["tuned+recordsize-128k"]) == {
        "datastore/postgresql": {"recordsize": "128k"}
    }
    cache = changed(maria["tuned"], maria["tuned+primarycache-all"])
    assert set(cache) == set(maria["tuned"].datasets)
    assert all(props == {"primarycache": "all"} for props in cache.values())


def test_apply_server_settings_removes_and_appends():
    text = "[mysqld]\n# a comment\ninnodb_doublewrite = 0\nport = 3306\n"
    out = variants.apply_server_settings(
        text, {"innodb_doublewrite": None, "innodb_flush_method": "O_DIRECT"}
    )
    assert variants.config_settings(out) == {"port": "3306", "innodb_flush_method": "O_DIRECT"}
    assert out.startswith("[mysqld]\n# a comment\nport = 3306\n")
    assert variants.apply_server_settings(text, {}) == text


def mariadbd_reads(config, tmp_path, names):
    values = mariadbd_values(config, tmp_path)
    return {name: values[name] for name in names}


def test_mariadbd_reads_the_stock_storage_settings_as_its_defaults(tmp_path):
    names = ["innodb_doublewrite", "innodb_flush_method", "innodb_use_native_aio", "innodb_flush_neighbors"]
    stock = mariadbd_reads("[mysqld]\n", tmp_path, names)
    assert stock["innodb_doublewrite"] == "TRUE"  # the point of the comparison
    v = by_name("mariadb")
    assert (
        mariadbd_reads(variants.variant_config(v["zfs-defaults"], HOSTS["mariadb"]), tmp_path, names) == stock
    )
    tuned = mariadbd_reads(variants.variant_config(v["tuned"], HOSTS["mariadb"]), tmp_path, names)
    assert tuned == {
        "innodb_doublewrite": "FALSE",
        "innodb_flush_method": "fsync",
        "innodb_use_native_aio": "FALSE",
        "innodb_flush_neighbors": "0",
    }
    doublewrite = variants.variant_config(v["tuned+doublewrite"], HOSTS["mariadb"])
    assert mariadbd_reads(doublewrite, tmp_path, ["innodb_doublewrite"]) == {"innodb_doublewrite": "TRUE"}


def postgres_reads(config, directory, name):
    path = directory / "postgresql.conf"
    path.write_text(config)
    done = subprocess.run(
        as_postgres(
            [
                require(PG_BIN / "postgres"),
                f"--config-file={path}",
                "-c",
                f"data_directory={directory}",
                "-C",
                name,
            ]
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_postgres_reads_the_stock_storage_settings_as_its_defaults(postgres_dir):
    v = by_name("postgresql")
    zfs_defaults = variants.variant_config(v["zfs-defaults"], HOSTS["postgresql"])
    tuned = variants.variant_config(v["tuned"], HOSTS["postgresql"])
    fpw = variants.variant_config(v["tuned+full_page_writes"], HOSTS["postgresql"])
    for name, stock in (("full_page_writes", "on"), ("wal_init_zero", "on"), ("wal_recycle", "on")):
        assert postgres_reads(zfs_defaults, postgres_dir, name) == stock
        assert postgres_reads(tuned, postgres_dir, name) == "off"
    assert postgres_reads(zfs_defaults, postgres_dir, "effective_io_concurrency") == "1"
    assert postgres_reads(fpw, postgres_dir, "full_page_writes") == "on"
