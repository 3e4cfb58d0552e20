using Microsoft.Extensions.Hosting;
using Npgsql;
using Wolverine;
using Wolverine.Persistence.Durability;

namespace PaymentsWolverine;

/// <summary>
/// The set-up step, run once on a fresh database before any process starts: the application's
/// own tables, then each service's envelope tables, made by Wolverine's own migration of its
/// message store (the processes also set their resources up on start, as Wolverine's
/// documentation shows; doing it here first keeps the three processes that start at once from
/// racing to create the same schema, and lets the harness's views read the tables).
/// </summary>
public static class Schema
{
    // payments.event_id is the id of the envelope Wolverine created for the payment's
    // PaymentCreated: Wolverine deletes an outgoing envelope once it is sent, so the payment row is
    // what remembers that an event was made at all (the outbox view reads it beside Wolverine's tables).
    // The ledger has no unique constraint on the message id on purpose: keeping a delivery from
    // being applied twice is the durable inbox's job, and a constraint here would hide it failing.
    private const string Sql = """
        CREATE TABLE IF NOT EXISTS payments (
            id uuid PRIMARY KEY,
            idempotency_key text NOT NULL UNIQUE,
            amount_cents bigint NOT NULL,
            currency text NOT NULL,
            event_id uuid NOT NULL UNIQUE,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE IF NOT EXISTS ledger (
            seq bigserial PRIMARY KEY,
            consumer text NOT NULL,
            message_id uuid NOT NULL,
            payment_id uuid NOT NULL,
            amount_cents bigint NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        );
        """;

    public static async Task<int> SetupAsync()
    {
        await using var connection = new NpgsqlConnection(Settings.ConnectionString());
        await connection.OpenAsync();
        await using var command = new NpgsqlCommand(Sql, connection);
        await command.ExecuteNonQueryAsync();
        await MigrateWolverineAsync(Payments.ConfigureWolverine);
        await MigrateWolverineAsync(Accounting.ConfigureWolverine);
        Console.WriteLine("schema ready");
        return 0;
    }

    private static async Task MigrateWolverineAsync(Action<WolverineOptions, string> configure)
    {
        var connectionString = Settings.ConnectionString();
        var builder = Host.CreateApplicationBuilder();
        builder.UseWolverine(opts => configure(opts, connectionString));
        using var host = builder.Build();
        await host.Services.GetRequiredService<IMessageStore>().Admin.MigrateAsync();
    }
}
