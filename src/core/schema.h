/* schema.h -- the database schema (schema.sql, embedded at build time). */
#ifndef CW_SCHEMA_H
#define CW_SCHEMA_H

#include <libpq-fe.h>
#include <stddef.h>

#define SCHEMA_VERSION 6

/* The text of schema.sql. */
extern const char schema_sql[];

/* Brings the database to SCHEMA_VERSION in one transaction, serialized with
 * other migrators by an advisory lock; a database at an older version is
 * upgraded.  Returns 1 when it applied the schema,
 * 0 when the database was already current, -1 with a message in err. */
int schema_migrate(PGconn *conn, char *err, size_t errlen);

#endif
