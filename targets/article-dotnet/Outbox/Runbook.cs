// The runbook's operations on dead letters: list them without their
// payloads' values, and send one again under the same id (its dead-letter
// mark cleared, a fresh attempt budget, due now).
using Npgsql;

namespace ArticlePayments.Outbox;

public static class Runbook
{
    private static NpgsqlDataSource Open()
    {
        string connectionString = Environment.GetEnvironmentVariable("ConnectionStrings__Payments")
            ?? throw new InvalidOperationException("ConnectionStrings__Payments is not set");
        return NpgsqlDataSource.Create(connectionString);
    }

    public static async Task<int> ListDeadLettersAsync(string[] args)
    {
        await using NpgsqlDataSource db = Open();
        // The payload's field names, not its values: it may carry personal data.
        await using NpgsqlCommand command = db.CreateCommand("""
            SELECT id, event_type, aggregate_id, attempts, dead_lettered_at, last_error,
                   (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(payload) AS k)
            FROM outbox_messages
            WHERE dead_lettered_at IS NOT NULL
            ORDER BY dead_lettered_at, id
            """);
        await using NpgsqlDataReader reader = await command.ExecuteReaderAsync();
        while (await reader.ReadAsync())
        {
            Console.WriteLine($"{reader.GetGuid(0)} {reader.GetString(1)} aggregate={reader.GetGuid(2)} " +
                $"attempts={reader.GetInt32(3)} dead_lettered_at={reader.GetFieldValue<DateTimeOffset>(4):O} " +
                $"payload_fields={(reader.IsDBNull(6) ? "" : reader.GetString(6))} " +
                $"last_error=\"{(reader.IsDBNull(5) ? "" : reader.GetString(5))}\"");
        }
        return 0;
    }

    public static async Task<int> RequeueAsync(string[] args)
    {
        if (args.Length != 1 || !Guid.TryParse(args[0], out Guid id))
        {
            Console.Error.WriteLine("usage: ArticlePayments requeue MESSAGE_ID");
            return 2;
        }
        await using NpgsqlDataSource db = Open();
        await using NpgsqlCommand command = db.CreateCommand("""
            UPDATE outbox_messages
            SET dead_lettered_at = NULL, attempts = 0, next_attempt_at = now(),
                lock_id = NULL, locked_until = NULL
            WHERE id = @id AND dead_lettered_at IS NOT NULL
            """);
        command.Parameters.AddWithValue("id", id);
        if (await command.ExecuteNonQueryAsync() == 0)
        {
            Console.Error.WriteLine($"requeue: {id} is not a dead letter");
            return 1;
        }
        Console.WriteLine($"requeued {id}: due now, same id");
        return 0;
    }
}
