// The accounting consumer.  Its AMQP consumer stores each delivery in the
// library's inbox (one transaction) and acks it only after the commit; the
// library's inbox listener (polling or logical replication) then applies
// the ledger entry and marks the inbox message processed in one
// transaction, so a message delivered twice takes effect once.
'use strict';

const amqp = require('amqplib');
const { Pool } = require('pg');
const {
  executeTransaction,
  initializeMessageStorage,
  initializePollingMessageListener,
  initializeReplicationMessageListener,
} = require('pg-transactional-outbox');
const common = require('./common');

const logger = common.logger('consumer');
const group = process.env.CONSUMER_GROUP || 'accounting';
const config = common.listenerConfig('inbox');
const pool = new Pool({ connectionString: common.databaseUrl(), max: 4 });
pool.on('error', (err) => logger.error(err, 'PostgreSQL pool error'));
// A connection lost while a client is checked out is reported on the
// client: logged there (the query in progress fails on its own), so that it
// does not end the process.
pool.on('connect', (client) => client.on('error', (err) => logger.warn(err, 'PostgreSQL client error')));
const storeInboxMessage = initializeMessageStorage(config, logger);

const paymentCreated = {
  aggregateType: 'payment',
  messageType: 'payment_created',
  handle: async (message, client) => {
    await client.query(
      'INSERT INTO ledger (consumer, message_id, payment_id, amount) VALUES ($1, $2, $3, $4)',
      [group, message.id, message.aggregateId, message.payload.amount]);
  },
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Consumes until the connection is lost, then connects again.
async function consume(onReady) {
  for (;;) {
    try {
      const connection = await amqp.connect(common.amqpUrl());
      const closed = new Promise((resolve) => connection.on('close', resolve));
      connection.on('error', (err) => logger.warn({ err: err.message }, 'AMQP connection error'));
      const ch = await connection.createChannel();
      ch.on('error', (err) => logger.warn({ err: err.message }, 'AMQP channel error'));
      await ch.assertExchange(common.exchange, 'topic', { durable: true });
      const queue = common.queue(group);
      await ch.assertQueue(queue, { durable: true });
      await ch.bindQueue(queue, common.exchange, common.routingKey);
      await ch.prefetch(10);
      await ch.consume(queue, (delivery) => {
        if (delivery === null) return;
        let message;
        try {
          message = JSON.parse(delivery.content.toString());
        } catch (err) {
          logger.error({ err: err.message }, 'a delivery that is not JSON: rejected');
          ch.nack(delivery, false, false);
          return;
        }
        pool.connect()
          .then((client) => executeTransaction(client, (c) => storeInboxMessage(message, c)))
          .then(() => ch.ack(delivery), (err) => {
            logger.warn({ err: err.message, id: message.id }, 'not stored: requeued');
            try { ch.nack(delivery, false, true); } catch { /* the channel is gone */ }
          });
      });
      onReady();
      await closed;
    } catch (err) {
      logger.warn({ err: err.message }, 'AMQP consumer: connecting again');
    }
    await sleep(500);
  }
}

async function main() {
  const [shutdown] = common.mode === 'replication'
    ? initializeReplicationMessageListener(config, [paymentCreated], logger)
    : initializePollingMessageListener(config, [paymentCreated], logger);
  let ready = false;
  void consume(() => {
    if (!ready) console.log(`consumer ready (${common.mode})`);
    ready = true;
  });
  for (const sig of ['SIGTERM', 'SIGINT']) {
    process.on(sig, () => shutdown().finally(() => process.exit(0)));
  }
}

main().catch((err) => {
  console.error(`consumer failed to start: ${err.message}`);
  process.exit(1);
});
