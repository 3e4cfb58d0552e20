// What the producer, the relay and the consumer share: their configuration
// (from the environment), the library's listener settings and the names of
// the database objects and broker topology.
'use strict';

const { Client } = require('pg');
const { getDefaultLogger } = require('pg-transactional-outbox');

function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return value;
}

// polling (the default) or replication: which of the library's listeners
// the relay and the consumer run.
const mode = process.env.LISTENER_TYPE || 'polling';
if (mode !== 'polling' && mode !== 'replication') {
  console.error(`LISTENER_TYPE must be polling or replication, not '${mode}'`);
  process.exit(2);
}

const databaseUrl = () => required('DATABASE_URL');
const amqpUrl = () => required('AMQP_URL');

// Replication slot names are unique per server, not per database: each
// database gets its own, named after it.
function slotName(kind) {
  const db = new Client({ connectionString: databaseUrl() }).database;
  const safe = db.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  return `${kind}_slot_${safe}`.slice(0, 63);
}

const exchange = process.env.EXCHANGE || 'payments';
const routingKey = 'payment.created';
const queue = (group) => process.env.QUEUE || group;

// The library's settings, as its README shows them: the outbox without the
// max attempts and poisonous message protections, the inbox with both.
function listenerConfig(outboxOrInbox) {
  const dbListenerConfig = { connectionString: databaseUrl() };
  const base = {
    dbSchema: 'public',
    dbTable: outboxOrInbox,
    enableMaxAttemptsProtection: outboxOrInbox === 'inbox',
    enablePoisonousMessageProtection: outboxOrInbox === 'inbox',
  };
  if (mode === 'replication') {
    return {
      outboxOrInbox,
      dbListenerConfig,
      settings: {
        ...base,
        dbPublication: `${outboxOrInbox}_pub`,
        dbReplicationSlot: slotName(outboxOrInbox),
      },
    };
  }
  return {
    outboxOrInbox,
    dbListenerConfig,
    settings: {
      ...base,
      nextMessagesBatchSize: 5,
      nextMessagesFunctionName: `next_${outboxOrInbox}_messages`,
      nextMessagesPollingIntervalInMs: 250,
    },
  };
}

module.exports = {
  mode,
  databaseUrl,
  amqpUrl,
  slotName,
  exchange,
  routingKey,
  queue,
  listenerConfig,
  logger: (name) => getDefaultLogger(name),
};
