"""What differs per database engine and server version: the settings each server accepts
(engines/data/, generated from the real binaries) and how the toolkit's settings are sized."""
