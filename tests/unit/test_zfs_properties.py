import pytest

from model.zfs_properties import (
    CREATE_ONLY_PROPERTIES,
    format_value,
    normalise,
    parse_size,
    same_value,
)


@pytest.mark.parametrize(
    "prop, wanted, reported",
    [
        ("recordsize", "16k", "16384"),
        ("recordsize", "16K", "16384"),
        ("recordsize", "16KiB", "16384"),
        ("recordsize", "16KB", "16384"),
        ("recordsize", 16384, "16384"),
        ("recordsize", "1M", "1048576"),
        ("volblocksize", "8k", "8192"),
        ("special_small_blocks", "0", "0"),
        ("quota", "none", "0"),
        ("refreservation", "none", "0"),
        ("quota", "1.5G", "1610612736"),
        ("filesystem_limit", "none", "18446744073709551615"),
        ("compression", "lz4", "lz4"),
        ("compression", "zstd-3", "zstd"),
        ("compression", "zstd", "zstd-3"),
        ("compression", "zstd-fast-1", "zstd-fast"),
        ("compression", "gzip-6", "gzip"),
        ("compression", "ZSTD-9", "zstd-9"),
        ("atime", "off", "off"),
        ("atime", False, "off"),
        ("autotrim", True, "on"),
        ("autoreplace", "yes", "on"),
        ("acltype", "posixacl", "posix"),
        ("acltype", "noacl", "off"),
        ("xattr", "sa", "on"),  # OpenZFS 2.3 reports sa as on
        ("dnodesize", "auto", "auto"),
        ("dnodesize", "16K", "16k"),
        ("mountpoint", "/datastore/", "/datastore"),
        ("mountpoint", "//datastore//mysql", "/datastore/mysql"),
        ("mountpoint", "none", "none"),
        ("primarycache", "metadata", "metadata"),
    ],
)
def test_declared_value_matches_what_zfs_reports(prop, wanted, reported):
    assert same_value(prop, wanted, reported)


@pytest.mark.parametrize(
    "prop, wanted, reported",
    [
        ("recordsize", "16k", "32768"),
        ("recordsize", "16k", "16000"),
        ("compression", "zstd", "zstd-9"),
        ("compression", "zstd-fast", "zstd-fast-10"),
        # "on" is stored as "on": the algorithm it picks is not what `zfs get` shows.
        ("compression", "on", "lz4"),
        ("compression", "lz4", "off"),
        ("atime", "on", "off"),
        ("acltype", "posixacl", "off"),
        ("mountpoint", "/datastore", "/Datastore"),
        ("primarycache", "all", "metadata"),
        ("com.example:role", "Data", "data"),
    ],
)
def test_different_settings_stay_different(prop, wanted, reported):
    assert not same_value(prop, wanted, reported)


def test_missing_current_value_is_never_the_same():
    assert not same_value("recordsize", "16k", None)


def test_parse_size_is_binary_and_rejects_words():
    assert parse_size("128k") == 131072
    assert parse_size("2T") == 2 * 1024**4
    assert parse_size("0") == 0
    assert parse_size("auto") is None
    assert parse_size(True) is None


def test_normalise_returns_canonical_forms():
    assert normalise("recordsize", "128K") == "131072"
    assert normalise("compression", "zstd-3") == "zstd"
    assert normalise("acltype", "posixacl") == "posix"
    assert normalise("com.example:note", " keep ") == " keep "


def test_create_only_properties():
    assert {"utf8only", "normalization", "casesensitivity", "volblocksize", "encryption"} <= (
        CREATE_ONLY_PROPERTIES
    )
    assert "recordsize" not in CREATE_ONLY_PROPERTIES
    assert "compression" not in CREATE_ONLY_PROPERTIES


def test_format_value_for_command_lines():
    assert format_value(True) == "on"
    assert format_value(False) == "off"
    assert format_value("16k") == "16k"
    assert format_value(12) == "12"
