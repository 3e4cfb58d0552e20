// One DbContext for the API and the accounting consumer: a payment, its
// outbox message and its idempotency record are saved by one SaveChangesAsync,
// so in one transaction.
using Microsoft.EntityFrameworkCore;

namespace ArticlePayments.Data;

public sealed class PaymentsDbContext(DbContextOptions<PaymentsDbContext> options) : DbContext(options)
{
    public DbSet<Payment> Payments => Set<Payment>();
    public DbSet<OutboxMessage> OutboxMessages => Set<OutboxMessage>();
    public DbSet<IdempotencyRecord> IdempotencyRecords => Set<IdempotencyRecord>();
    public DbSet<LedgerEntry> LedgerEntries => Set<LedgerEntry>();
    public DbSet<AppliedAggregateVersion> AppliedAggregateVersions => Set<AppliedAggregateVersion>();
    public DbSet<VersionAnomaly> VersionAnomalies => Set<VersionAnomaly>();

    protected override void OnModelCreating(ModelBuilder model)
    {
        model.Entity<Payment>(e =>
        {
            e.ToTable("payments");
            e.HasKey(p => p.Id);
            e.Property(p => p.Id).HasColumnName("id").ValueGeneratedNever();
            e.Property(p => p.Amount).HasColumnName("amount");
            e.Property(p => p.Currency).HasColumnName("currency");
            e.Property(p => p.Status).HasColumnName("status");
            e.Property(p => p.Version).HasColumnName("version");
            e.Property(p => p.CreatedAt).HasColumnName("created_at");
        });

        model.Entity<OutboxMessage>(e =>
        {
            e.ToTable("outbox_messages");
            e.HasKey(m => m.Id);
            e.Property(m => m.Id).HasColumnName("id").ValueGeneratedNever();
            e.Property(m => m.AggregateType).HasColumnName("aggregate_type");
            e.Property(m => m.AggregateId).HasColumnName("aggregate_id");
            e.Property(m => m.AggregateVersion).HasColumnName("aggregate_version");
            e.Property(m => m.EventType).HasColumnName("event_type");
            e.Property(m => m.SchemaVersion).HasColumnName("schema_version");
            e.Property(m => m.Payload).HasColumnName("payload").HasColumnType("jsonb");
            e.Property(m => m.TraceParent).HasColumnName("trace_parent");
            e.Property(m => m.OccurredAt).HasColumnName("occurred_at");
            e.Property(m => m.PublishedAt).HasColumnName("published_at");
            e.Property(m => m.Attempts).HasColumnName("attempts");
            e.Property(m => m.NextAttemptAt).HasColumnName("next_attempt_at");
            e.Property(m => m.LockId).HasColumnName("lock_id");
            e.Property(m => m.LockedUntil).HasColumnName("locked_until");
            e.Property(m => m.LastError).HasColumnName("last_error");
            e.Property(m => m.DeadLetteredAt).HasColumnName("dead_lettered_at");
        });

        model.Entity<IdempotencyRecord>(e =>
        {
            e.ToTable("idempotency_records");
            e.HasKey(r => new { r.ClientId, r.Key });
            e.Property(r => r.ClientId).HasColumnName("client_id");
            e.Property(r => r.Key).HasColumnName("idempotency_key");
            e.Property(r => r.RequestHash).HasColumnName("request_hash");
            e.Property(r => r.PaymentId).HasColumnName("payment_id");
            e.Property(r => r.EventId).HasColumnName("event_id");
            e.Property(r => r.ResponseStatus).HasColumnName("response_status");
            e.Property(r => r.ResponseBody).HasColumnName("response_body");
            e.Property(r => r.CreatedAt).HasColumnName("created_at");
            // schema.sql's foreign key, declared so that SaveChangesAsync inserts
            // the payment first.
            e.HasOne<Payment>().WithMany().HasForeignKey(r => r.PaymentId);
        });

        model.Entity<LedgerEntry>(e =>
        {
            e.ToTable("ledger_entries");
            e.HasKey(l => l.Seq);
            e.Property(l => l.Seq).HasColumnName("seq").ValueGeneratedOnAdd();
            e.Property(l => l.ConsumerName).HasColumnName("consumer_name");
            e.Property(l => l.MessageId).HasColumnName("message_id");
            e.Property(l => l.PaymentId).HasColumnName("payment_id");
            e.Property(l => l.Amount).HasColumnName("amount");
            e.Property(l => l.Currency).HasColumnName("currency");
            e.Property(l => l.AggregateVersion).HasColumnName("aggregate_version");
            e.Property(l => l.CreatedAt).HasColumnName("created_at");
        });

        model.Entity<AppliedAggregateVersion>(e =>
        {
            e.ToTable("accounting_aggregate_versions");
            e.HasKey(v => new { v.ConsumerName, v.AggregateId });
            e.Property(v => v.ConsumerName).HasColumnName("consumer_name");
            e.Property(v => v.AggregateId).HasColumnName("aggregate_id");
            e.Property(v => v.LastVersion).HasColumnName("last_version");
        });

        model.Entity<VersionAnomaly>(e =>
        {
            e.ToTable("accounting_version_anomalies");
            e.HasKey(a => new { a.ConsumerName, a.MessageId });
            e.Property(a => a.ConsumerName).HasColumnName("consumer_name");
            e.Property(a => a.MessageId).HasColumnName("message_id");
            e.Property(a => a.AggregateId).HasColumnName("aggregate_id");
            e.Property(a => a.ExpectedVersion).HasColumnName("expected_version");
            e.Property(a => a.ReceivedVersion).HasColumnName("received_version");
            e.Property(a => a.DetectedAt).HasColumnName("detected_at");
        });
    }
}
