#!/bin/sh
# Mounted into the primary's /docker-entrypoint-initdb.d (the official image runs it once, when
# it creates the cluster): admit streaming replication from the compose `backend` network, with
# the same password authentication as every other connection. The local image
# (ops/images/postgres) writes the same line itself.
echo "host replication all samenet scram-sha-256" >>"$PGDATA/pg_hba.conf"
