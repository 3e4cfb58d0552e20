// The relay's SQL, through NpgsqlDataSource: the article's claim (a lease:
// lock_id, locked_until, attempts + 1, committed at once), and the mark and
// the retry, each fenced by the claim's lock_id so that only the holder of
// the lease may settle the message.
using Microsoft.Extensions.Options;
using Npgsql;
using NpgsqlTypes;

namespace ArticlePayments.Outbox;

public sealed class OutboxOptions
{
    /// <summary>The article's 30 seconds are illustrative: a lease must outlast
    /// the publishing of a whole batch.</summary>
    public int LeaseSeconds { get; set; } = 30;
    public int BatchSize { get; set; } = 10;
    public int MaxAttempts { get; set; } = 12;
    public int IdleDelayMilliseconds { get; set; } = 500;
}

public sealed record ClaimedOutboxMessage(
    Guid Id,
    Guid AggregateId,
    long AggregateVersion,
    string EventType,
    int SchemaVersion,
    string Payload,
    string? TraceParent,
    DateTimeOffset OccurredAt,
    int Attempts);

/// <summary>What ScheduleRetryAsync did.</summary>
public enum RetryOutcome { Scheduled, DeadLettered, LeaseLost }

public sealed class OutboxRepository(NpgsqlDataSource dataSource, IOptions<OutboxOptions> options)
{
    private readonly OutboxOptions _options = options.Value;

    private const string ClaimSql = """
        WITH candidates AS (
            SELECT id
            FROM outbox_messages
            WHERE published_at IS NULL
              AND dead_lettered_at IS NULL
              AND next_attempt_at <= now()
              AND (locked_until IS NULL OR locked_until < now())
            ORDER BY occurred_at, id
            FOR UPDATE SKIP LOCKED
            LIMIT @batch_size
        )
        UPDATE outbox_messages AS message
        SET lock_id = @worker_id,
            locked_until = now() + @lease,
            attempts = attempts + 1
        FROM candidates
        WHERE message.id = candidates.id
        RETURNING
            message.id,
            message.aggregate_id,
            message.aggregate_version,
            message.event_type,
            message.schema_version,
            message.payload,
            message.trace_parent,
            message.occurred_at,
            message.attempts
        """;

    /// <summary>Claims up to a batch of due messages under lockId, in one
    /// statement (its own transaction), and returns them in (occurred_at, id)
    /// order: UPDATE ... RETURNING does not keep the CTE's order.</summary>
    public async Task<IReadOnlyList<ClaimedOutboxMessage>> ClaimAsync(Guid lockId, CancellationToken ct)
    {
        await using NpgsqlCommand command = dataSource.CreateCommand(ClaimSql);
        command.Parameters.AddWithValue("batch_size", _options.BatchSize);
        command.Parameters.AddWithValue("worker_id", lockId);
        command.Parameters.AddWithValue("lease", NpgsqlDbType.Interval, TimeSpan.FromSeconds(_options.LeaseSeconds));
        List<ClaimedOutboxMessage> claimed = [];
        await using NpgsqlDataReader reader = await command.ExecuteReaderAsync(ct);
        while (await reader.ReadAsync(ct))
        {
            claimed.Add(new ClaimedOutboxMessage(
                reader.GetGuid(0), reader.GetGuid(1), reader.GetInt64(2), reader.GetString(3),
                reader.GetInt32(4), reader.GetString(5), reader.IsDBNull(6) ? null : reader.GetString(6),
                reader.GetFieldValue<DateTimeOffset>(7), reader.GetInt32(8)));
        }
        // Guid's order is the uuid's (byte by byte, as PostgreSQL compares them).
        return claimed.OrderBy(m => m.OccurredAt).ThenBy(m => m.Id).ToList();
    }

    /// <summary>Marks the message published if lockId still holds it; false
    /// when another relay has claimed it since (it will publish it again).</summary>
    public async Task<bool> MarkPublishedAsync(Guid id, Guid lockId, CancellationToken ct)
    {
        await using NpgsqlCommand command = dataSource.CreateCommand("""
            UPDATE outbox_messages
            SET published_at = now(), lock_id = NULL, locked_until = NULL, last_error = NULL
            WHERE id = @id AND lock_id = @lock_id AND published_at IS NULL
            """);
        command.Parameters.AddWithValue("id", id);
        command.Parameters.AddWithValue("lock_id", lockId);
        return await command.ExecuteNonQueryAsync(ct) == 1;
    }

    /// <summary>After a failed attempt: at the attempt limit the message is
    /// dead-lettered, else it is due again after delay (backoff with jitter,
    /// computed by the caller and persisted here); either way the lease is
    /// released and the sanitized error kept.  Fenced by lockId like the mark.</summary>
    public async Task<RetryOutcome> ScheduleRetryAsync(Guid id, Guid lockId, TimeSpan delay, string error,
        CancellationToken ct)
    {
        await using NpgsqlCommand command = dataSource.CreateCommand("""
            UPDATE outbox_messages
            SET dead_lettered_at = CASE WHEN attempts >= @max_attempts THEN now() END,
                next_attempt_at = CASE WHEN attempts >= @max_attempts THEN next_attempt_at
                                       ELSE now() + @delay END,
                last_error = @error,
                lock_id = NULL,
                locked_until = NULL
            WHERE id = @id AND lock_id = @lock_id AND published_at IS NULL
            RETURNING dead_lettered_at IS NOT NULL
            """);
        command.Parameters.AddWithValue("id", id);
        command.Parameters.AddWithValue("lock_id", lockId);
        command.Parameters.AddWithValue("max_attempts", _options.MaxAttempts);
        command.Parameters.AddWithValue("delay", NpgsqlDbType.Interval, delay);
        command.Parameters.AddWithValue("error", ErrorText.Sanitize(error));
        object? deadLettered = await command.ExecuteScalarAsync(ct);
        return deadLettered switch
        {
            null => RetryOutcome.LeaseLost,
            true => RetryOutcome.DeadLettered,
            _ => RetryOutcome.Scheduled,
        };
    }
}
