// Creates the service's tables on an empty database: the payments and the
// accounting ledger (the business data), and the library's outbox and inbox
// with what the chosen listener needs (DatabaseSetup's SQL: the polling
// functions and indexes, or the publications and replication slots).
'use strict';

const { Client } = require('pg');
const { DatabaseSetup } = require('pg-transactional-outbox');
const { mode, databaseUrl, listenerConfig } = require('./common');

const business = /* sql */ `
CREATE TABLE payments (
  id uuid PRIMARY KEY,
  idempotency_key text NOT NULL UNIQUE,
  amount numeric(12, 2) NOT NULL,
  currency text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ledger (
  seq bigserial PRIMARY KEY,
  consumer text NOT NULL,
  message_id uuid NOT NULL,
  payment_id uuid NOT NULL,
  amount numeric(12, 2) NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
`;

async function main() {
  const client = new Client({ connectionString: databaseUrl() });
  await client.connect();
  const role = (await client.query('SELECT current_user AS u')).rows[0].u;
  await client.query(business);
  for (const outboxOrInbox of ['outbox', 'inbox']) {
    const { settings } = listenerConfig(outboxOrInbox);
    const names = {
      outboxOrInbox,
      schema: settings.dbSchema,
      table: settings.dbTable,
      listenerRole: role,
      handlerRole: role,
    };
    await client.query(DatabaseSetup.dropAndCreateTable(names));
    if (mode === 'polling') {
      await client.query(DatabaseSetup.createPollingFunction({
        ...names,
        nextMessagesName: settings.nextMessagesFunctionName,
      }));
      await client.query(DatabaseSetup.setupPollingIndexes(names));
    } else {
      // ALTER ROLE ... REPLICATION is a no-op for a superuser, and needed
      // for any other role.
      await client.query(DatabaseSetup.setupReplicationCore({
        ...names,
        publication: settings.dbPublication,
      }));
      // The slot in a transaction of its own, as the library asks.
      await client.query(DatabaseSetup.setupReplicationSlot({
        replicationSlot: settings.dbReplicationSlot,
      }));
    }
  }
  await client.end();
  console.log(`setup done (${mode})`);
}

main().catch((err) => {
  console.error(`setup failed: ${err.message}`);
  process.exit(1);
});
