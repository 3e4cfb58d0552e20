// The relay: the library's outbox listener (polling or logical replication)
// with a message handler that publishes each outbox message to RabbitMQ and
// waits for the broker's confirm.  The AMQP message id is the outbox
// message id; the body is the outbox message, as the consumer stores it.
'use strict';

const amqp = require('amqplib');
const {
  initializePollingMessageListener,
  initializeReplicationMessageListener,
} = require('pg-transactional-outbox');
const common = require('./common');

const logger = common.logger('relay');
let channel = null; // a confirm channel, opened on first use and after a loss

async function openChannel() {
  const connection = await amqp.connect(common.amqpUrl());
  connection.on('error', (err) => logger.warn({ err: err.message }, 'AMQP connection error'));
  connection.on('close', () => { channel = null; });
  const ch = await connection.createConfirmChannel();
  ch.on('error', (err) => logger.warn({ err: err.message }, 'AMQP channel error'));
  ch.on('close', () => { channel = null; });
  await ch.assertExchange(common.exchange, 'topic', { durable: true });
  // The consumer's queue too, so that nothing is published before it is bound.
  const queue = common.queue(process.env.CONSUMER_GROUP || 'accounting');
  await ch.assertQueue(queue, { durable: true });
  await ch.bindQueue(queue, common.exchange, common.routingKey);
  return ch;
}

const messagePublisher = {
  handle: async (message) => {
    if (!channel) channel = await openChannel();
    const ch = channel;
    await new Promise((resolve, reject) => {
      ch.publish(common.exchange, common.routingKey, Buffer.from(JSON.stringify(message)), {
        messageId: message.id,
        contentType: 'application/json',
        persistent: true,
      }, (err) => (err ? reject(err) : resolve()));
    });
  },
};

async function main() {
  channel = await openChannel();
  const config = common.listenerConfig('outbox');
  const [shutdown] = common.mode === 'replication'
    ? initializeReplicationMessageListener(config, messagePublisher, logger)
    : initializePollingMessageListener(config, messagePublisher, logger);
  console.log(`relay ready (${common.mode})`);
  for (const sig of ['SIGTERM', 'SIGINT']) {
    process.on(sig, () => shutdown().finally(() => process.exit(0)));
  }
}

main().catch((err) => {
  console.error(`relay failed to start: ${err.message}`);
  process.exit(1);
});
