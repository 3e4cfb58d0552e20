// The accounting consumer's handler, as the article writes it: the inbox
// marker (consumer_name, message_id) is inserted ON CONFLICT DO NOTHING and
// the ledger entry added in the same transaction, so both commit or neither
// does; a marker that is already there means the message was applied before,
// and the copy changes nothing.  Before applying, the aggregate's version is
// checked against the last one applied (the article's tenth test): one that
// is not the next is parked, recorded and not applied.
using ArticlePayments.Data;
using Microsoft.EntityFrameworkCore;
using Microsoft.EntityFrameworkCore.Storage;

namespace ArticlePayments.Accounting;

public sealed class AccountingOptions
{
    public string ConsumerName { get; set; } = "accounting";
}

public enum HandleOutcome { Applied, Duplicate, VersionAnomaly }

public sealed class PaymentCreatedHandler(PaymentsDbContext dbContext, TimeProvider timeProvider,
    Microsoft.Extensions.Options.IOptions<AccountingOptions> options)
{
    private readonly string _consumerName = options.Value.ConsumerName;

    /// <summary>Returns what the message did; the caller ACKs only after this
    /// returns, so after the COMMIT.  Throws when nothing was committed.</summary>
    public async Task<HandleOutcome> HandleAsync(PaymentCreated message, CancellationToken cancellationToken)
    {
        string consumerName = _consumerName;
        // With a retrying execution strategy, a transaction the code begins must
        // run whole inside the strategy's delegate (EF Core's rule), so that a
        // transient failure replays all of it.
        IExecutionStrategy strategy = dbContext.Database.CreateExecutionStrategy();
        return await strategy.ExecuteAsync(async ct =>
        {
            dbContext.ChangeTracker.Clear();
            DateTimeOffset processedAtUtc = timeProvider.GetUtcNow();

            await using IDbContextTransaction transaction = await dbContext.Database.BeginTransactionAsync(ct);

            int claimed = await dbContext.Database.ExecuteSqlInterpolatedAsync(
                $"""
                INSERT INTO inbox_messages (
                    consumer_name,
                    message_id,
                    processed_at
                )
                VALUES (
                    {consumerName},
                    {message.EventId},
                    {processedAtUtc}
                )
                ON CONFLICT DO NOTHING
                """,
                ct);

            if (claimed == 0)
            {
                await transaction.CommitAsync(ct);
                return HandleOutcome.Duplicate;
            }

            // Locked until the COMMIT: two versions of one aggregate are checked one after the other.
            AppliedAggregateVersion? applied = await dbContext.AppliedAggregateVersions
                .FromSql($"SELECT * FROM accounting_aggregate_versions WHERE consumer_name = {consumerName} AND aggregate_id = {message.PaymentId} FOR UPDATE")
                .SingleOrDefaultAsync(ct);
            long expected = (applied?.LastVersion ?? 0) + 1;
            if (message.AggregateVersion != expected)
            {
                dbContext.VersionAnomalies.Add(new VersionAnomaly
                {
                    ConsumerName = consumerName, MessageId = message.EventId, AggregateId = message.PaymentId,
                    ExpectedVersion = expected, ReceivedVersion = message.AggregateVersion, DetectedAt = processedAtUtc,
                });
                await dbContext.SaveChangesAsync(ct);
                await transaction.CommitAsync(ct);
                return HandleOutcome.VersionAnomaly;
            }

            LedgerEntry entry = LedgerEntry.FromPayment(consumerName, message.EventId, message.PaymentId,
                message.Amount, message.Currency, message.AggregateVersion, processedAtUtc);
            dbContext.LedgerEntries.Add(entry);
            if (applied is null)
                dbContext.AppliedAggregateVersions.Add(new AppliedAggregateVersion
                {
                    ConsumerName = consumerName, AggregateId = message.PaymentId, LastVersion = message.AggregateVersion,
                });
            else
                applied.LastVersion = message.AggregateVersion;
            await dbContext.SaveChangesAsync(ct);
            await transaction.CommitAsync(ct);
            return HandleOutcome.Applied;
        }, cancellationToken);
    }
}
