"""Example production fleet.

`mariadb`: shaped like Let's Encrypt's (Dell R7525, 2x EPYC 7542 = 128 threads, 2 TB RAM, 24 NVMe):
one primary and two replicas, 11 two-way mirrors + 2 hot spares, ashift 13.
`postgresql`: shaped like Heap's: a primary and two hot standbys, zstd, 64k records.

Secrets (replication and application passwords) are not here: see docs/secrets.md.
"""

TIB = 1024**4
R7525 = {"ram_bytes": 2 * TIB, "cpus": 128}


def intel_p4610(host_no: int) -> list[str]:
    # Drives are listed in mirror order, alternating between the two backplane halves so that
    # each mirror's sides sit on different controllers; the last two become hot spares.
    return [
        f"/dev/disk/by-id/nvme-INTEL_SSDPE2KE064T8_PHLN{host_no:02d}{n:02d}0001P6P4AGN" for n in range(24)
    ]


def mariadb_host(name: str, no: int, role: str, address: str) -> tuple[str, dict]:
    data = {
        "ssh_hostname": f"{name}.db.example.net",
        "ssh_user": "root",  # every step needs root (apt, zpool, /etc, systemd): no sudo
        "engine": "mariadb",
        "role": role,
        "server_id": no,
        "replication_address": address,
        "hardware": R7525,
        "drives": intel_p4610(no),
        "zpool_name": f"db{no:02d}",
        "zpool_spares": 2,
        "zpool_ashift": 13,
        "databases": [{"name": "boulder"}],
        "db_users": [
            {
                "name": "boulder",
                "database": "boulder",
                "password_secret": "boulder_password",
                "privileges": "SELECT,INSERT,UPDATE,DELETE",
            },
        ],
    }
    if role == "replica":
        data["primary"] = "db01"
    return name, data


def postgresql_host(name: str, role: str, address: str) -> tuple[str, dict]:
    data = {
        "ssh_hostname": f"{name}.pg.example.net",
        "ssh_user": "root",  # every step needs root (apt, zpool, /etc, systemd): no sudo
        "engine": "postgresql",
        "role": role,
        "replication_address": address,
        "hardware": {"ram_bytes": 512 * 1024**3, "cpus": 64},
        "workload": "analytics",
        "drive_pattern": "nvme-SAMSUNG_MZQL27T6HBLA-00A07_*",
        "drive_count": 24,
        "zfs_compression": "zstd",
        "zfs_dataset_properties": {"datastore/postgresql": {"recordsize": "64k"}},
        "databases": [{"name": "heap", "owner": "heap"}],
        "db_users": [{"name": "heap", "password_secret": "heap_password"}],
    }
    if role == "replica":
        data["primary"] = "pg01"
    return name, data


mariadb = [
    mariadb_host("db01", 1, "primary", "10.20.0.11"),
    mariadb_host("db02", 2, "replica", "10.20.0.12"),
    mariadb_host("db03", 3, "replica", "10.20.0.13"),
]

postgresql = [
    postgresql_host("pg01", "primary", "10.30.0.11"),
    postgresql_host("pg02", "replica", "10.30.0.12"),
    postgresql_host("pg03", "replica", "10.30.0.13"),
]

# Prometheus and the alert rules (roles/monitoring.py; group_data/monitoring.py applies to this
# group): on a replica, which takes no application writes. It scrapes every host above on its
# replication address, so both networks must be routed to it.
monitoring = ["db03"]
