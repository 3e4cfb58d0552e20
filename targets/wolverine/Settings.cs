namespace PaymentsWolverine;

/// <summary>
/// What a process of this service reads from its environment.  The harness hands each process
/// its own database and broker address (through its fault proxy), so nothing here is shared
/// between processes except the names below.
/// </summary>
public static class Settings
{
    /// <summary>The exchange PaymentCreated is published to, and the accounting group's queue bound to it.</summary>
    public const string Exchange = "payments";
    public const string AccountingQueue = "accounting";

    /// <summary>
    /// Each Wolverine service keeps its envelope tables in a schema of its own: two services on one
    /// database sharing one set of tables would recover (and try to handle) each other's envelopes.
    /// </summary>
    public const string PaymentsSchema = "wolverine_payments";
    public const string AccountingSchema = "wolverine_accounting";

    public static string Required(string name) =>
        Environment.GetEnvironmentVariable(name) is { Length: > 0 } value
            ? value
            : throw new InvalidOperationException($"environment variable {name} is not set");

    /// <summary>
    /// The Npgsql connection string, from PGHOST, PGPORT, PGUSER and PGDATABASE (a host that is a
    /// folder is a Unix socket's, as in libpq).  Npgsql's own defaults stand: nothing is tuned.
    /// </summary>
    public static string ConnectionString() => new Npgsql.NpgsqlConnectionStringBuilder
    {
        Host = Required("PGHOST"),
        Port = int.Parse(Required("PGPORT")),
        Username = Required("PGUSER"),
        Database = Required("PGDATABASE"),
    }.ConnectionString;

    public static Uri AmqpUri() => new(Required("AMQP_URL"));

    /// <summary>
    /// WOLVERINE_PUBLISHER_CONFIRMS=1: RabbitMQ channels with publisher confirms, each publish
    /// awaiting the broker's.  Unset (the default): Wolverine's own default, no confirms.
    /// </summary>
    public static bool PublisherConfirms() =>
        Environment.GetEnvironmentVariable("WOLVERINE_PUBLISHER_CONFIRMS") == "1";

    /// <summary>
    /// WOLVERINE_DURABILITY_AGENT=0: this node never runs the database's durability agent (the one
    /// agent per database that recovers a dead node's envelopes), so the leader places it on the
    /// nodes that do.  Unset (the default): Wolverine's own default, every node may run it.
    /// </summary>
    public static bool DurabilityAgent() =>
        Environment.GetEnvironmentVariable("WOLVERINE_DURABILITY_AGENT") != "0";
}
