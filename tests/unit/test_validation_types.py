"""Host data of the wrong type, at any depth, and values ZFS or the kernel would refuse: one message
each (host, key, value, what is wrong, fix), and validate() never raises, whatever it is given."""

import copy
import re
from pathlib import Path

import pytest

from model.hostdata import HostConfig
from model.secrets import Secrets
from validation import KEY_TYPES, KNOWN_KEYS, validate

from tests.unit.conftest import DEFAULTS, REPO, host_data

SECRETS = Secrets({"replication_password": "r", "app_pw": "a"}, "test")


def messages(fleet):
    return [str(p) for p in validate(fleet, SECRETS)]


# --- every key, every wrong type ---------------------------------------------------------------

WRONG = [
    None,
    True,
    False,
    0,
    7,
    -1,
    1.5,
    "",
    "x",
    "4G",
    [],
    ["x"],
    [1],
    [None],
    (1, 2),
    {},
    {"x": 1},
    {1: 2},
    [{"a": 1}],
    [{"name": 1}],
    {"mariadb": []},
    {"mariadb": {"a": "b"}},
    b"bytes",
    object(),
]


def kind_ok(kind, value):
    if kind == "a string":
        return isinstance(value, str)
    if kind == "an integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "a list":
        return isinstance(value, (list, tuple))
    if kind == "a boolean":
        return isinstance(value, bool)
    if kind == "a number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, dict)


@pytest.mark.parametrize("host", ["db1", "db2", "pg1", "pg2"])
@pytest.mark.parametrize("key", sorted(KEY_TYPES))
def test_no_value_of_any_key_makes_validation_raise(fleet, host, key):
    kind, nullable, _ = KEY_TYPES[key]
    for value in WRONG:
        data = copy.deepcopy(fleet)
        data[host][key] = value
        problems = validate(data, SECRETS)  # must not raise
        for p in problems:
            assert str(p).startswith(f"{p.host}: {p.key} = ") and "Fix: " in str(p), str(p)
        if not kind_ok(kind, value) and not (value is None and nullable):
            # a wrong type: exactly one message, about this key, and nothing cascades from it
            assert [(p.host, p.key) for p in problems] == [(host, key)], [str(p) for p in problems]
            expected = f"{kind} or None" if nullable else kind
            assert problems[0].message.startswith(f"must be {expected}, not "), problems[0].message


def test_whole_host_data_of_the_wrong_type(fleet):
    fleet["db9"] = ["engine", "mariadb"]
    assert messages(fleet) == [
        "db9: host data = ['engine', 'mariadb']: is a list, not a mapping. "
        'Fix: list the host as ("name", {"engine": ..., ...})'
    ]


def test_a_setting_name_that_is_not_a_string(fleet):
    fleet["db1"][13] = "zpool_ashift"
    assert messages(fleet) == [
        "db1: 13 = 'zpool_ashift': a setting's name must be a string. Fix: e.g. \"zpool_ashift\": 13"
    ]


def test_every_documented_key_is_typed_and_read():
    """model/keys.py defines (and group_data/all.py hands pyinfra) exactly the keys validation
    knows, and HostConfig reads each."""
    assert set(DEFAULTS) == KNOWN_KEYS == set(KEY_TYPES)
    source = (REPO / "model" / "hostdata.py").read_text()
    unread = [k for k in KNOWN_KEYS if not re.search(rf'(data, |data\.get\()"{k}"', source)]
    assert unread == []


def test_defaults_have_the_types_they_document():
    for key, (kind, nullable, _) in KEY_TYPES.items():
        value = DEFAULTS[key]
        assert (value is None and nullable) or kind_ok(kind, value), key


# --- nested values: exact messages -------------------------------------------------------------

NESTED = {
    "hardware without cpus": (
        "db1",
        {"hardware": {"ram_bytes": 4 * 1024**3}},
        "db1: hardware = {'ram_bytes': 4294967296}: misses cpus. Fix: give both, e.g. "
        '{"ram_bytes": 4 * 1024**3, "cpus": 2}',
    ),
    "hardware RAM as text": (
        "db1",
        {"hardware": {"ram_bytes": "4G", "cpus": 2}},
        "db1: hardware['ram_bytes'] = '4G': must be an integer, not a string. Fix: bytes as an "
        "integer, e.g. 4 * 1024**3",
    ),
    "hardware cpus as a boolean": (
        "pg1",
        {"hardware": {"ram_bytes": 4 * 1024**3, "cpus": True}},
        "pg1: hardware['cpus'] = True: must be an integer, not a boolean. Fix: a count, e.g. 2",
    ),
    "hardware with a misspelt key": (
        "pg1",
        {"hardware": {"ram_bytes": 4 * 1024**3, "cpus": 2, "cpu": 4}},
        "pg1: hardware['cpu'] = 4: unknown hardware key. Fix: use only ram_bytes and cpus",
    ),
    "a drive that is not a string": (
        "db1",
        {"drives": [1] + [f"/dev/disk/by-id/nvme-TEST_db1_{i:02d}" for i in range(1, 24)]},
        'db1: drives[0] = 1: must be a string, not an integer. Fix: e.g. "/dev/disk/by-id/nvme-..."',
    ),
    "wipe_drives as one string": (
        "db1",
        {"wipe_drives": "/dev/disk/by-id/nvme-TEST_db1_00"},
        "db1: wipe_drives = '/dev/disk/by-id/nvme-TEST_db1_00': must be a list, not a string. Fix: "
        'e.g. ["/dev/disk/by-id/nvme-..."]',
    ),
    "a client network as a list": (
        "pg1",
        {"db_client_networks": [["10.0.0.0/8"]]},
        "pg1: db_client_networks[0] = ['10.0.0.0/8']: must be a string, not a list. Fix: e.g. "
        '"10.1.0.0/16"',
    ),
    "zfs_datasets for an unknown engine": (
        "db1",
        {"zfs_datasets": {**DEFAULTS["zfs_datasets"], "mysql": {}}},
        "db1: zfs_datasets['mysql'] = {}: not an engine. Fix: key it by engine: ['mariadb', 'postgresql']",
    ),
    "a dataset's properties as a string": (
        "db1",
        {
            "zfs_datasets": {
                **DEFAULTS["zfs_datasets"],
                "mariadb": {**DEFAULTS["zfs_datasets"]["mariadb"], "datastore/mysql": "16k"},
            }
        },
        "db1: zfs_datasets['mariadb']['datastore/mysql'] = '16k': must be a mapping of property "
        '-> value, not a string. Fix: e.g. {"recordsize": "16k"}',
    ),
    "a property value as a list": (
        "pg1",
        {"zfs_dataset_properties": {"datastore/postgresql": {"recordsize": ["64k"]}}},
        "pg1: zfs_dataset_properties['datastore/postgresql']['recordsize'] = ['64k']: must be a "
        'string or an integer, not a list. Fix: write it as zfs set takes it, e.g. "16k", '
        '"off", "/datastore/mysql"',
    ),
    "an on/off property as a boolean": (
        "pg1",
        {"zfs_dataset_properties": {"datastore": {"atime": False}}},
        "pg1: zfs_dataset_properties['datastore']['atime'] = False: must be a string or an "
        'integer, not a boolean. Fix: write it as zfs set takes it, e.g. "16k", "off", '
        '"/datastore/mysql"',
    ),
    "overrides as a list": (
        "pg1",
        {"zfs_dataset_properties": [{"datastore/postgresql": {"recordsize": "64k"}}]},
        "pg1: zfs_dataset_properties = [{'datastore/postgresql': {'recordsize': '64k'}}]: must be "
        'a mapping, not a list. Fix: e.g. {"datastore/postgresql": {"recordsize": "64k"}}',
    ),
    "a dataset role missing": (
        "db1",
        {
            "zfs_dataset_roles": {
                "mariadb": {"parent": "datastore", "data": "datastore/mysql"},
                "postgresql": DEFAULTS["zfs_dataset_roles"]["postgresql"],
            }
        },
        "db1: zfs_dataset_roles['mariadb']['log'] = None: missing. Fix: name the log dataset of "
        "mariadb, one of zfs_datasets['mariadb']",
    ),
    "a dataset role that is not one": (
        "db1",
        {
            "zfs_dataset_roles": {
                **DEFAULTS["zfs_dataset_roles"],
                "mariadb": {**DEFAULTS["zfs_dataset_roles"]["mariadb"], "binlog": "datastore/mysql-log"},
            }
        },
        "db1: zfs_dataset_roles['mariadb']['binlog'] = 'datastore/mysql-log': not a dataset role. "
        "Fix: use only parent, data, log",
    ),
    "a module parameter with a unit": (
        "pg1",
        {"zfs_module_params": {"zfs_arc_max": "4G"}},
        "pg1: zfs_module_params['zfs_arc_max'] = '4G': must be an integer, not a string: the "
        "kernel takes integers only (no unit suffixes, no fractions). Fix: write 4294967296 "
        "(bytes)",
    ),
    "a module parameter as a digit string": (
        "pg1",
        {"zfs_module_params": {"zfs_txg_timeout": "10"}},
        "pg1: zfs_module_params['zfs_txg_timeout'] = '10': must be an integer, not a string: the "
        "kernel takes integers only (no unit suffixes, no fractions). Fix: write it as a number: "
        "10",
    ),
    "a module parameter as a fraction": (
        "db1",
        {"zfs_module_params": {"zfs_arc_max": 1.5e9}},
        "db1: zfs_module_params['zfs_arc_max'] = 1500000000.0: must be an integer, not a float: "
        "the kernel takes integers only (no unit suffixes, no fractions). Fix: an integer in the "
        "parameter's unit, e.g. 4294967296 for 4 GiB",
    ),
    "a module parameter as a boolean": (
        "db1",
        {"zfs_module_params": {"zfs_prefetch_disable": True}},
        "db1: zfs_module_params['zfs_prefetch_disable'] = True: must be an integer, not a boolean:"
        " the kernel takes integers only (no unit suffixes, no fractions). Fix: an integer in the "
        "parameter's unit, e.g. 4294967296 for 4 GiB",
    ),
    "a db setting as a list": (
        "db1",
        {"db_settings": {"innodb_io_capacity": [2000]}},
        "db1: db_settings['innodb_io_capacity'] = [2000]: must be a single value (string, number "
        "or boolean), not a list. Fix: write it as the server's config file takes it, e.g. 2000 "
        'or "8MB"; remove the key for the sized default',
    ),
    "a db setting as None": (
        "pg1",
        {"db_settings": {"work_mem": None}},
        "pg1: db_settings['work_mem'] = None: must be a single value (string, number or "
        "boolean), not None. Fix: write it as the server's config file takes it, e.g. 2000 or "
        '"8MB"; remove the key for the sized default',
    ),
    "a db setting with a non-string name": (
        "pg1",
        {"db_settings": {1: "x"}},
        "pg1: db_settings[1] = 'x': a setting name must be a non-empty string. Fix: e.g. "
        '"innodb_io_capacity" or "work_mem"',
    ),
    "a database as a string": (
        "db1",
        {"databases": ["app"]},
        'db1: databases[0] = \'app\': must be a mapping, not a string. Fix: e.g. {"name": "app"}',
    ),
    "a database without a name": (
        "db1",
        {"databases": [{"owner": "app"}]},
        'db1: databases[0].name = None: missing. Fix: e.g. {"name": "app"}',
    ),
    "a database owner as a list": (
        "pg1",
        {"databases": [{"name": "app", "owner": ["app"]}]},
        "pg1: databases[0].owner = ['app']: must be a user's name (a string), not a list. Fix: e.g. \"app\"",
    ),
    "a database with an unknown setting": (
        "pg1",
        {"databases": [{"name": "app", "encoding": "UTF8"}]},
        "pg1: databases[0].encoding = 'UTF8': not a databases setting. Fix: use only name, owner",
    ),
    "users as one mapping": (
        "db1",
        {"db_users": {"name": "app", "password_secret": "app_pw"}},
        "db1: db_users = {'name': 'app', 'password_secret': 'app_pw'}: must be a list, not a "
        'mapping. Fix: e.g. [{"name": "app", "password_secret": "app_password"}]',
    ),
    "a user's secret as a list": (
        "db1",
        {"db_users": [{"name": "app", "password_secret": ["app_pw"]}]},
        "db1: db_users[0].password_secret = ['app_pw']: must be a secret's name (a string), not a "
        'list. Fix: e.g. "app_password"',
    ),
    "a user's database as a mapping": (
        "db1",
        {"db_users": [{"name": "app", "password_secret": "app_pw", "database": {"a": 1}}]},
        "db1: db_users[0].database = {'a': 1}: must be a database's name (a string), not a "
        'mapping. Fix: e.g. "app"',
    ),
    "a user's owner flag as text": (
        "pg1",
        {
            "databases": [{"name": "app"}],
            "db_users": [{"name": "app", "password_secret": "app_pw", "owner": "yes"}],
        },
        "pg1: db_users[0].owner = 'yes': must be true or false, not a string. Fix: e.g. True",
    ),
    "a user's privileges as a number": (
        "db1",
        {
            "databases": [{"name": "app"}],
            "db_users": [{"name": "app", "password_secret": "app_pw", "database": "app", "privileges": 7}],
        },
        "db1: db_users[0].privileges = 7: must be a string or a list of strings, not an integer. "
        'Fix: e.g. "SELECT,INSERT"',
    ),
    "None where a list is the default": (
        "db1",
        {"drives": None},
        "db1: drives = None: must be a list, not None. Fix: set a list (e.g. "
        '["/dev/disk/by-id/nvme-...", ...]), or remove the key for the default',
    ),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_nested_type_mistake(fleet, case):
    host, data, expected = NESTED[case]
    fleet[host].update(copy.deepcopy(data))
    assert messages(fleet) == [expected]


# --- values ZFS, the kernel or the servers would refuse ----------------------------------------

VALUES = {
    "recordsize with a space": (
        "db1",
        {"zfs_dataset_properties": {"datastore/mysql": {"recordsize": "16 k"}}},
        "db1: zfs_datasets['mariadb']['datastore/mysql']['recordsize'] = '16 k': not a size zfs "
        'takes. Fix: digits and a unit, without a space: "16k", "16K", "1M", "100G"',
    ),
    "quota with a space": (
        "pg1",
        {"zfs_dataset_properties": {"datastore": {"quota": "10 G"}}},
        "pg1: zfs_datasets['postgresql']['datastore']['quota'] = '10 G': not a size zfs takes. "
        'Fix: digits and a unit, without a space: "16k", "16K", "1M", "100G" or "none"',
    ),
    "a negative reservation": (
        "pg1",
        {"zfs_dataset_properties": {"datastore": {"reservation": -1}}},
        "pg1: zfs_datasets['postgresql']['datastore']['reservation'] = -1: not a size zfs takes. "
        'Fix: digits and a unit, without a space: "16k", "16K", "1M", "100G" or "none"',
    ),
    "copies out of range": (
        "pg1",
        {"zfs_dataset_properties": {"datastore/postgresql": {"copies": 4}}},
        "pg1: zfs_datasets['postgresql']['datastore/postgresql']['copies'] = 4: invalid value for "
        "copies. Fix: use one of ['1', '2', '3']",
    ),
    "an unknown checksum": (
        "pg1",
        {"zfs_dataset_properties": {"datastore/postgresql": {"checksum": "md5"}}},
        "pg1: zfs_datasets['postgresql']['datastore/postgresql']['checksum'] = 'md5': invalid "
        "value for checksum. Fix: use one of ['on', 'off', 'fletcher2', 'fletcher4', 'sha256', "
        "'noparity', 'sha512', 'skein', 'edonr', 'blake3']",
    ),
    "a mountpoint with a space": (
        "db1",
        {"zfs_dataset_properties": {"datastore/mysql": {"mountpoint": "/data store/mysql"}}},
        "db1: zfs_datasets['mariadb']['datastore/mysql']['mountpoint'] = '/data store/mysql': "
        "needs an absolute mountpoint without spaces, '.' or '..' parts or a trailing slash. Fix: "
        "e.g. /datastore/mysql",
    ),
    "a relative mountpoint": (
        "pg1",
        {"zfs_dataset_properties": {"datastore/postgresql": {"mountpoint": "datastore/pg"}}},
        "pg1: zfs_datasets['postgresql']['datastore/postgresql']['mountpoint'] = 'datastore/pg': "
        "needs an absolute mountpoint without spaces, '.' or '..' parts or a trailing slash. Fix: "
        "e.g. /datastore/mysql",
    ),
    "a mountpoint with ..": (
        "pg1",
        {"zfs_dataset_properties": {"datastore/postgresql": {"mountpoint": "/datastore/../pg"}}},
        "pg1: zfs_datasets['postgresql']['datastore/postgresql']['mountpoint'] = "
        "'/datastore/../pg': needs an absolute mountpoint without spaces, '.' or '..' parts or a "
        "trailing slash. Fix: e.g. /datastore/mysql",
    ),
    "two datasets on one mountpoint": (
        "db1",
        {"zfs_dataset_properties": {"datastore/mysql-log": {"mountpoint": "/datastore/mysql"}}},
        "db1: zfs_datasets['mariadb']['datastore/mysql-log']['mountpoint'] = '/datastore/mysql': "
        "also the mountpoint of datastore/mysql. Fix: give every dataset its own",
    ),
    "a pool name beginning with raidz": (
        "db1",
        {"zpool_name": "raidz1"},
        "db1: zpool_name = 'raidz1': zpool refuses names beginning with mirror, raidz, draid or "
        "spare, and names beginning with log, cache, special, dedup or c[0-9] read as vdevs. Fix: "
        'pick another name, e.g. "dbpool" or "db01"',
    ),
    "a pool name beginning with log": (
        "db1",
        {"zpool_name": "logs"},
        "db1: zpool_name = 'logs': zpool refuses names beginning with mirror, raidz, draid or "
        "spare, and names beginning with log, cache, special, dedup or c[0-9] read as vdevs. Fix: "
        'pick another name, e.g. "dbpool" or "db01"',
    ),
    "a pool name like a Solaris disk": (
        "db1",
        {"zpool_name": "c0t0d0"},
        "db1: zpool_name = 'c0t0d0': zpool refuses names beginning with mirror, raidz, draid or "
        "spare, and names beginning with log, cache, special, dedup or c[0-9] read as vdevs. Fix: "
        'pick another name, e.g. "dbpool" or "db01"',
    ),
    "a pool name with a space": (
        "db1",
        {"zpool_name": "db pool"},
        "db1: zpool_name = 'db pool': not a valid pool name: it must start with a letter and hold "
        'only letters, digits, _ . : - (no spaces). Fix: e.g. "dbpool" or "db01"',
    ),
    "an unknown module parameter": (
        "db1",
        {"zfs_module_params": {"zfs_arc_maxx": 1 << 30}},
        "db1: zfs_module_params['zfs_arc_maxx'] = 1073741824: not a parameter of the zfs module "
        "(zfs(4), OpenZFS 2.3). Fix: did you mean one of ['zfs_arc_max', 'zfs_arc_min']?",
    ),
    "a string module parameter": (
        "db1",
        {"zfs_module_params": {"zfs_vdev_raidz_impl": 1}},
        "db1: zfs_module_params['zfs_vdev_raidz_impl'] = 1: a string parameter of the zfs module; "
        "only numeric ones are set here. Fix: remove it",
    ),
    "a negative unsigned module parameter": (
        "pg1",
        {"zfs_module_params": {"zfs_txg_timeout": -5}},
        "pg1: zfs_module_params['zfs_txg_timeout'] = -5: out of the parameter's range "
        "0..4294967295. Fix: see man 4 zfs for its unit and meaning",
    ),
    "a dataset role naming no dataset": (
        "pg1",
        {
            "zfs_dataset_roles": {
                **DEFAULTS["zfs_dataset_roles"],
                "postgresql": {
                    "parent": "datastore",
                    "data": "datastore/pgdata",
                    "log": "datastore/postgresql-wal",
                },
            }
        },
        "pg1: zfs_dataset_roles['postgresql']['data'] = 'datastore/pgdata': no such dataset in "
        "zfs_datasets['postgresql']. Fix: use one of ['datastore', 'datastore/postgresql', "
        "'datastore/postgresql-wal']",
    ),
    "data and log on one dataset": (
        "pg1",
        {
            "zfs_dataset_roles": {
                **DEFAULTS["zfs_dataset_roles"],
                "postgresql": {
                    "parent": "datastore",
                    "data": "datastore/postgresql",
                    "log": "datastore/postgresql",
                },
            }
        },
        "pg1: zfs_dataset_roles['postgresql']['log'] = 'datastore/postgresql': the same dataset "
        "as the data. Fix: give the log its own dataset",
    ),
    "the data on the parent": (
        "db1",
        {
            "zfs_dataset_roles": {
                **DEFAULTS["zfs_dataset_roles"],
                "mariadb": {"parent": "datastore", "data": "datastore", "log": "datastore/mysql-log"},
            }
        },
        "db1: zfs_dataset_roles['mariadb']['data'] = 'datastore': the data dataset must be a "
        "child of the parent datastore. Fix: name a dataset datastore/...",
    ),
    "a replication address nobody can reach": (
        "db1",
        {"replication_address": "127.0.0.1"},
        "db1: replication_address = '127.0.0.1': other hosts cannot reach this host at that "
        "address. Fix: set the host's own address on the replication network",
    ),
    "a server_id on a PostgreSQL host": (
        "pg1",
        {"server_id": 3},
        "pg1: server_id = 3: PostgreSQL has no server_id (it would be ignored). Fix: remove it",
    ),
    "a drive pattern with a space": (
        "pg1",
        {"drive_pattern": "nvme-TEST pg1_*"},
        "pg1: drive_pattern = 'nvme-TEST pg1_*': must be a glob of names under /dev/disk/by-id, "
        'without a path or spaces. Fix: e.g. "nvme-INTEL_SSDPE2KE064T8_*"',
    ),
    "a misspelt privilege": (
        "db1",
        {
            "databases": [{"name": "app"}],
            "db_users": [
                {"name": "app", "password_secret": "app_pw", "database": "app", "privileges": "SELECT,INSRT"}
            ],
        },
        "db1: db_users[0].privileges = 'SELECT,INSRT': 'INSRT' is not a database-level privilege. "
        "Fix: did you mean one of ['INSERT']?",
    ),
    "a database owned by no declared user": (
        "pg1",
        {
            "databases": [{"name": "app", "owner": "ap"}],
            "db_users": [{"name": "app", "password_secret": "app_pw"}],
        },
        "pg1: databases[0].owner = 'ap': no such user in db_users. Fix: declare the user, or use "
        "one of ['app']",
    ),
    "a user declared twice": (
        "pg1",
        {
            "databases": [{"name": "app"}],
            "db_users": [
                {"name": "app", "password_secret": "app_pw"},
                {"name": "app", "password_secret": "app_pw"},
            ],
        },
        "pg1: db_users[1].name = 'app': declared twice. Fix: declare each user once",
    ),
    "db_port, which nothing reads": (
        "pg1",
        {"db_port": 5433},
        "pg1: db_port = 5433: unknown key. Fix: nothing reads it: the servers listen on their "
        "default port (MariaDB 3306, PostgreSQL 5432); remove it",
    ),
    "a misspelt key without our prefixes": (
        "pg2",
        {"replication_adress": "10.99.0.22"},
        "pg2: replication_adress = '10.99.0.22': unknown key. Fix: did you mean one of "
        "['replication_address']?",
    ),
}


@pytest.mark.parametrize("case", sorted(VALUES))
def test_value_refused(fleet, case):
    host, data, expected = VALUES[case]
    fleet[host].update(copy.deepcopy(data))
    assert messages(fleet) == [expected]


@pytest.mark.parametrize("size", ["16k", "16K", "16KiB", "16kb", "1M", "1.5M", "16384", 16384, "128k"])
def test_sizes_zfs_takes_pass(fleet, size):
    fleet["db1"]["zfs_dataset_properties"] = {"datastore/mysql": {"recordsize": size}}
    assert messages(fleet) == [] or "power of two" in messages(fleet)[0]


@pytest.mark.parametrize("name", ["dbpool", "db01", "tank", "Data_1", "logical", "pool.a:b-c"])
def test_pool_names_zpool_takes_pass(fleet, name):
    # "logical" begins with "log": refused as well (see the rule); the others pass
    fleet["db1"]["zpool_name"] = name
    assert (messages(fleet) == []) == (name != "logical")


def test_known_module_parameters_pass(fleet):
    fleet["db1"]["zfs_module_params"] = {
        "zfs_txg_timeout": 10,
        "zfs_arc_max": 1 << 30,
        "zfs_vdev_async_write_max_active": 10,
    }
    assert messages(fleet) == []


# --- datasets are found by name ----------------------------------------------------------------


def test_named_datasets_whatever_their_order(fleet):
    fleet["db1"]["zfs_datasets"]["mariadb"] = dict(
        reversed(list(fleet["db1"]["zfs_datasets"]["mariadb"].items()))
    )
    assert messages(fleet) == []
    cfg = HostConfig.from_data("db1", fleet["db1"])
    assert (cfg.parent_dataset, cfg.data_dataset, cfg.log_dataset) == (
        "datastore",
        "datastore/mysql",
        "datastore/mysql-log",
    )
    assert list(cfg.datasets)[0] == "datastore"  # created first
    assert cfg.child_datasets == ["datastore/mysql-log", "datastore/mysql"]
    assert cfg.datasets["datastore"]["compression"] == "lz4"
    assert "compression" not in cfg.datasets["datastore/mysql"]


def test_renamed_datasets_follow_the_roles(fleet):
    pg = fleet["pg1"]
    pg["zfs_datasets"]["postgresql"]["datastore/wal"] = pg["zfs_datasets"]["postgresql"].pop(
        "datastore/postgresql-wal"
    )
    pg["zfs_datasets"]["postgresql"]["datastore/wal"]["mountpoint"] = "/datastore/wal"
    pg["zfs_dataset_roles"]["postgresql"]["log"] = "datastore/wal"
    for host in ("pg2",):
        fleet[host].update(copy.deepcopy({k: pg[k] for k in ("zfs_datasets", "zfs_dataset_roles")}))
    assert messages(fleet) == []
    cfg = HostConfig.from_data("pg1", pg)
    assert cfg.log_dataset == "datastore/wal" and cfg.mountpoint(cfg.log_dataset) == "/datastore/wal"


def test_a_dataset_outside_the_parent(fleet):
    fleet["db1"]["zfs_datasets"]["mariadb"]["other"] = {"mountpoint": "/other"}
    assert messages(fleet) == [
        "db1: zfs_datasets['mariadb']['other'] = 'other': is not under the "
        "parent dataset datastore. Fix: name it datastore/..."
    ]


def test_roles_zfs_owns_the_named_children():
    """roles/zfs.py hands the engine's account every dataset but the named parent."""
    source = Path(REPO / "roles" / "zfs.py").read_text()
    assert "for relative in cfg.child_datasets:" in source
    assert "list(cfg.datasets)[1:]" not in source


def test_host_data_helper_defaults_validate():
    """conftest's host_data (group_data/all.py's defaults) is what every test builds on."""
    data = host_data(
        engine="postgresql",
        role="primary",
        drive_pattern="nvme-X_*",
        drive_count=4,
        hardware={"ram_bytes": 4 * 1024**3, "cpus": 2},
    )
    assert validate({"pg9": data}, SECRETS) == []
