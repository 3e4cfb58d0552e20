// The rows the service writes through EF Core.  Their tables are schema.sql's;
// PaymentsDbContext maps each property onto its snake_case column.
namespace ArticlePayments.Data;

public sealed class Payment
{
    public Guid Id { get; private set; }
    public decimal Amount { get; private set; }
    public string Currency { get; private set; } = "";
    public string Status { get; private set; } = "";
    public long Version { get; private set; }
    public DateTimeOffset CreatedAt { get; private set; }

    public static Payment Create(Guid id, decimal amount, string currency, DateTimeOffset createdAt) =>
        new() { Id = id, Amount = amount, Currency = currency, Status = "Created", Version = 1, CreatedAt = createdAt };
}

public sealed class OutboxMessage
{
    public Guid Id { get; private set; }
    public string AggregateType { get; private set; } = "";
    public Guid AggregateId { get; private set; }
    public long AggregateVersion { get; private set; }
    public string EventType { get; private set; } = "";
    public int SchemaVersion { get; private set; }
    public string Payload { get; private set; } = "";
    public string? TraceParent { get; private set; }
    public DateTimeOffset OccurredAt { get; private set; }
    public DateTimeOffset? PublishedAt { get; private set; }
    public int Attempts { get; private set; }
    public DateTimeOffset NextAttemptAt { get; private set; }
    public Guid? LockId { get; private set; }
    public DateTimeOffset? LockedUntil { get; private set; }
    public string? LastError { get; private set; }
    public DateTimeOffset? DeadLetteredAt { get; private set; }

    public static OutboxMessage Create(Guid id, string aggregateType, Guid aggregateId, long aggregateVersion,
        string eventType, int schemaVersion, string payload, string? traceParent, DateTimeOffset occurredAt) =>
        new()
        {
            Id = id, AggregateType = aggregateType, AggregateId = aggregateId,
            AggregateVersion = aggregateVersion, EventType = eventType, SchemaVersion = schemaVersion,
            Payload = payload, TraceParent = traceParent, OccurredAt = occurredAt,
            // Due at once: the relay may claim it as soon as the transaction commits.
            NextAttemptAt = occurredAt,
        };
}

/// <summary>The answer given to one client's Idempotency-Key, stored with the
/// payment it created.</summary>
public sealed class IdempotencyRecord
{
    public string ClientId { get; init; } = "";
    public string Key { get; init; } = "";
    public string RequestHash { get; init; } = "";
    public Guid PaymentId { get; init; }
    public Guid EventId { get; init; }
    public int ResponseStatus { get; init; }
    public string ResponseBody { get; init; } = "";
    public DateTimeOffset CreatedAt { get; init; }
}

public sealed class LedgerEntry
{
    public long Seq { get; private set; }
    public string ConsumerName { get; private set; } = "";
    public Guid MessageId { get; private set; }
    public Guid PaymentId { get; private set; }
    public decimal Amount { get; private set; }
    public string Currency { get; private set; } = "";
    public long AggregateVersion { get; private set; }
    public DateTimeOffset CreatedAt { get; private set; }

    public static LedgerEntry FromPayment(string consumerName, Guid messageId, Guid paymentId, decimal amount,
        string currency, long aggregateVersion, DateTimeOffset createdAt) =>
        new()
        {
            ConsumerName = consumerName, MessageId = messageId, PaymentId = paymentId, Amount = amount,
            Currency = currency, AggregateVersion = aggregateVersion, CreatedAt = createdAt,
        };
}

public sealed class AppliedAggregateVersion
{
    public string ConsumerName { get; init; } = "";
    public Guid AggregateId { get; init; }
    public long LastVersion { get; set; }
}

public sealed class VersionAnomaly
{
    public string ConsumerName { get; init; } = "";
    public Guid MessageId { get; init; }
    public Guid AggregateId { get; init; }
    public long ExpectedVersion { get; init; }
    public long ReceivedVersion { get; init; }
    public DateTimeOffset DetectedAt { get; init; }
}
