"""Day-2 procedures behind runbooks/: switchover, failover, seeding, restores, drive replacement,
compression rewrites and the rolling converge. They build on roles/ (what a converged host looks
like), operations/ and facts/; nothing below them imports them."""
