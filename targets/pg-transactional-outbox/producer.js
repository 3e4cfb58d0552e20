// The payments API: POST /payments with an Idempotency-Key stores the
// payment and its outbox message in one transaction (the library's message
// storage); the same key again answers with the payment it made.
'use strict';

const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { Pool } = require('pg');
const { initializeMessageStorage } = require('pg-transactional-outbox');
const { databaseUrl, listenerConfig, logger: makeLogger } = require('./common');

const logger = makeLogger('producer');
const pool = new Pool({ connectionString: databaseUrl(), max: 8 });
pool.on('error', (err) => logger.error(err, 'PostgreSQL pool error'));
// A connection lost while a client is checked out is reported on the
// client: logged there (the query in progress fails on its own), so that it
// does not end the process.
pool.on('connect', (client) => client.on('error', (err) => logger.warn(err, 'PostgreSQL client error')));
const storeOutboxMessage = initializeMessageStorage(listenerConfig('outbox'), logger);

function reply(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function existing(key) {
  const r = await pool.query('SELECT id FROM payments WHERE idempotency_key = $1', [key]);
  return r.rows[0];
}

async function createPayment(key, amount, currency) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const id = randomUUID();
    const inserted = await client.query(
      `INSERT INTO payments (id, idempotency_key, amount, currency) VALUES ($1, $2, $3, $4)
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`,
      [id, key, amount, currency]);
    if (inserted.rowCount === 0) {
      // The key was used before (or by a request still running: the
      // INSERT waited for it): answer with that payment.
      await client.query('ROLLBACK');
      client.release();
      const prior = await existing(key);
      return prior ? { status: 200, id: prior.id } : { status: 409, id: null };
    }
    await storeOutboxMessage({
      id: randomUUID(),
      aggregateType: 'payment',
      aggregateId: id,
      messageType: 'payment_created',
      payload: { id, amount, currency },
      createdAt: new Date().toISOString(),
    }, client);
    await client.query('COMMIT');
    client.release();
    return { status: 201, id };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    client.release(true);
    throw err;
  }
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (req.method === 'GET' && url.pathname === '/health') {
    pool.query('SELECT 1').then(() => reply(res, 200, { ok: true }),
      (err) => reply(res, 503, { error: err.message }));
    return;
  }
  if (req.method !== 'POST' || url.pathname !== '/payments') {
    reply(res, 404, { error: 'not found' });
    return;
  }
  const key = req.headers['idempotency-key'];
  let text = '';
  req.on('data', (chunk) => { text += chunk; });
  req.on('end', () => {
    let body;
    try {
      body = JSON.parse(text || '{}');
    } catch {
      reply(res, 400, { error: 'the body is not JSON' });
      return;
    }
    const amount = Number(body.amount);
    if (!key || !Number.isFinite(amount) || amount <= 0) {
      reply(res, 400, { error: 'an Idempotency-Key header and a positive amount are required' });
      return;
    }
    createPayment(key, amount, body.currency || 'EUR').then(
      ({ status, id }) => reply(res, status, { id }),
      (err) => {
        logger.error(err, 'payment failed');
        reply(res, 503, { error: err.message });
      });
  });
});

const port = Number(process.env.PORT || 8080);
server.listen(port, '127.0.0.1', () => console.log(`producer listening on ${port}`));
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => server.close(() => pool.end().then(() => process.exit(0))));
}
