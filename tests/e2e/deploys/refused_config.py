"""A deploy for tests/e2e/test_config_check.py: the host's rendered server config plus one line
(host data `refused_line`) that the host's own server must refuse, placed with the same
operation the roles use. Validation is not run: the point is the on-host check behind it."""

from pyinfra import host

from operations import common
from roles import engine, mariadb, postgresql, render

cfg = engine.host_config()
sized = engine.sized_for_this_host(cfg)
line = host.data.get("refused_line")
if cfg.engine == "mariadb":
    text = render.render("my.cnf.j2", render.mariadb_context(cfg, sized)) + f"\n[mysqld]\n{line}\n"
    common.config_file(
        name="my.cnf with a line mariadbd refuses",
        path=mariadb.CONFIG,
        content=text,
        check=mariadb.CONFIG_CHECK,
        checker=mariadb.SERVER_BINARY,
    )
else:
    members = list(engine.group(cfg).members)
    text = render.render("postgresql.conf.j2", render.postgresql_context(cfg, sized, members)) + f"{line}\n"
    common.config_file(
        name="postgresql.conf with a line postgres refuses",
        path=f"{postgresql.cluster(cfg).config_dir}/postgresql.conf",
        content=text,
        user="postgres",
        group="postgres",
        check=postgresql.cluster(cfg).config_check,
        checker=postgresql.cluster(cfg).server_binary,
    )
