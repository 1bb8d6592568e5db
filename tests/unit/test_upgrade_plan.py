"""day2/upgrade.py: the release upgrade's steps per engine, and the data every step runs with, each
of them an inventory validation accepts (a state the upgrade passes through is never one the
toolkit refuses)."""

import pytest

from day2 import kit, upgrade
from day2.upgrade import Step
from validation import REPO_ROOT, load_inventory_isolated, validate


def on_12(fleet):
    for data in fleet.values():
        data["debian_release"] = "12"
    return fleet


def with_data(fleet, overrides):
    out = {}
    for name, data in fleet.items():
        merged = {**data, **overrides.get(name, {})}
        out[name] = {k: v for k, v in merged.items() if v is not None}
    return out


def kinds(p):
    return [(s.kind, s.host) for s in p.steps]


def test_mariadb_replicas_first_then_the_primary_through_a_switchover(fleet):
    p = upgrade.plan(on_12(fleet), "db1")
    assert (p.group, p.primary, p.members) == ("mariadb", "db1", ("db1", "db2"))
    assert kinds(p) == [
        ("release", "db2"),
        ("converge", "db2"),
        ("switchover", "db2"),
        ("release", "db1"),
        ("converge", "db1"),
        ("switchover", "db1"),
    ]
    assert not any(s.writes_stop for s in p.steps)


def test_postgresql_standbys_keep_15_until_the_major_step_then_are_reseeded(fleet):
    p = upgrade.plan(on_12(fleet), "postgresql")
    assert kinds(p) == [
        ("release", "pg2"),
        ("switchover", "pg2"),
        ("release", "pg1"),
        ("major", "pg2"),
        ("reseed", "pg1"),
        ("converge", "pg2"),
        ("converge", "pg1"),
        ("switchover", "pg1"),
    ]
    assert p.steps[4].source == "pg2"
    assert upgrade.data_for(p, 0)["pg2"] == {"debian_release": "13", "postgresql_version": "15"}
    assert upgrade.data_for(p, 4)["pg1"]["postgresql_version"] is None


@pytest.mark.parametrize("group", ["mariadb", "postgresql"])
def test_every_step_runs_with_valid_data_and_the_end_is_the_inventory_moved(fleet, secrets, group):
    fleet = on_12(fleet)
    p = upgrade.plan(fleet, group)
    for i, step in enumerate(p.steps):
        problems = validate(with_data(fleet, upgrade.data_for(p, i)), secrets)
        assert problems == [], (i, step, [str(x) for x in problems])
    end = with_data(fleet, upgrade.data_after(p, len(p.steps)))
    moved = with_data(fleet, upgrade.final_data(p))
    assert end == moved


def test_a_three_node_mariadb_group_upgrades_both_replicas_first(fleet, secrets):
    fleet["db3"] = {**fleet["db2"], "server_id": 3, "replication_address": "10.99.0.13"}
    fleet["db3"]["drives"] = [d.replace("db2", "db3") for d in fleet["db2"]["drives"]]
    fleet = on_12(fleet)
    assert validate(fleet, secrets) == []
    p = upgrade.plan(fleet, "db2")
    assert kinds(p)[:5] == [
        ("release", "db2"),
        ("converge", "db2"),
        ("release", "db3"),
        ("converge", "db3"),
        ("switchover", "db2"),
    ]
    for i in range(len(p.steps)):
        assert validate(with_data(fleet, upgrade.data_for(p, i)), secrets) == [], p.steps[i]


def test_a_primary_alone_is_upgraded_in_place_and_says_its_writes_stop(fleet, secrets):
    fleet = on_12({"pg1": fleet["pg1"]})
    p = upgrade.plan(fleet, "pg1")
    assert kinds(p) == [("release", "pg1"), ("major", "pg1"), ("converge", "pg1")]
    assert [s.writes_stop for s in p.steps] == [True, True, False]
    assert "writes stop" in p.steps[0].describe()
    for i in range(len(p.steps)):
        assert validate(with_data(fleet, upgrade.data_for(p, i)), secrets) == []


def test_a_group_already_on_the_new_release_has_no_steps(fleet):
    p = upgrade.plan(fleet, "mariadb")  # the fleet's default release: 13
    assert p.steps == () and p.done == ("db1", "db2")


def test_replicas_left_behind_a_moved_mariadb_primary_are_moved_as_replicas(fleet, secrets):
    fleet["db2"]["debian_release"] = "12"
    p = upgrade.plan(fleet, "db1")
    assert kinds(p) == [("release", "db2"), ("converge", "db2")]
    for i in range(len(p.steps)):
        assert validate(with_data(fleet, upgrade.data_for(p, i)), secrets) == []


def test_standbys_left_behind_a_moved_postgresql_primary_are_refused_with_the_way_on(fleet):
    fleet["pg2"]["debian_release"] = "12"
    with pytest.raises(upgrade.PlanError, match="its standbys pg2 do not") as err:
        upgrade.plan(fleet, "pg2")
    assert "--from" in err.value.fix


def test_a_name_that_is_no_group_is_refused_with_the_groups(fleet):
    with pytest.raises(upgrade.PlanError, match="names no replication group") as err:
        upgrade.plan(fleet, "nope")
    assert "mariadb, postgresql" in err.value.fix


def test_each_step_describes_itself():
    assert "pg_upgradecluster --method=link" in Step("major", "pg2").describe()
    assert Step("reseed", "pg1", source="pg2").describe() == "pg1: reseeded from pg2 (runbooks/seed.py)"


def test_the_upgrade_inventory_loads_with_the_overrides_and_removes_a_key_set_to_none(tmp_path):
    lab = str(REPO_ROOT / "inventories" / "lab.py")
    path = tmp_path / "upgrade.py"
    overrides = {
        "pg2": {"debian_release": "12", "postgresql_version": "15"},
        "pg1": {"postgresql_version": None},
    }
    path.write_text(kit.overridden_inventory_text(lab, overrides, "a test"))
    loaded = load_inventory_isolated(str(path))
    original = load_inventory_isolated(lab)
    assert loaded["pg2"]["debian_release"] == "12" and loaded["pg2"]["postgresql_version"] == "15"
    assert loaded["pg1"].get("postgresql_version") is None
    assert loaded["db1"] == original["db1"]
