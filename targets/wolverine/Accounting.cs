using JasperFx.Resources;
using Microsoft.EntityFrameworkCore;
using Wolverine;
using Wolverine.EntityFrameworkCore;
using Wolverine.Postgresql;
using Wolverine.RabbitMQ;

namespace PaymentsWolverine;

public class LedgerEntry
{
    public long Seq { get; set; }
    public string Consumer { get; set; } = "";
    public Guid MessageId { get; set; }
    public Guid PaymentId { get; set; }
    public long AmountCents { get; set; }
}

public class AccountingDb(DbContextOptions<AccountingDb> options) : DbContext(options)
{
    public DbSet<LedgerEntry> Ledger => Set<LedgerEntry>();

    protected override void OnModelCreating(ModelBuilder model)
    {
        var entry = model.Entity<LedgerEntry>();
        entry.ToTable("ledger");
        entry.HasKey(e => e.Seq);
        entry.Property(e => e.Seq).HasColumnName("seq").ValueGeneratedOnAdd();
        entry.Property(e => e.Consumer).HasColumnName("consumer");
        entry.Property(e => e.MessageId).HasColumnName("message_id");
        entry.Property(e => e.PaymentId).HasColumnName("payment_id");
        entry.Property(e => e.AmountCents).HasColumnName("amount_cents");
    }
}

/// <summary>
/// The accounting consumer's handler.  Wolverine's EF Core transaction middleware saves the
/// ledger entry and marks the envelope handled in its durable inbox in one transaction.
/// </summary>
public static class PaymentCreatedHandler
{
    public static void Handle(PaymentCreated created, Envelope envelope, AccountingDb db)
    {
        db.Ledger.Add(new LedgerEntry
        {
            Consumer = Settings.AccountingQueue,
            MessageId = envelope.Id,
            PaymentId = created.PaymentId,
            AmountCents = created.AmountCents,
        });
    }
}

public static class Accounting
{
    /// <summary>Wolverine as its documentation configures a durable inbox on RabbitMQ with EF Core.</summary>
    public static void ConfigureWolverine(WolverineOptions opts, string connectionString)
    {
        opts.ServiceName = "accounting";
        opts.PersistMessagesWithPostgresql(connectionString, Settings.AccountingSchema);
        opts.UseEntityFrameworkCoreTransactions();
        opts.Policies.AutoApplyTransactions();

        opts.UseRabbitMq(Settings.AmqpUri())
            .AutoProvision()
            .DeclareExchange(Settings.Exchange, exchange =>
            {
                exchange.ExchangeType = ExchangeType.Fanout;
                exchange.BindQueue(Settings.AccountingQueue);
            });
        opts.ListenToRabbitQueue(Settings.AccountingQueue).UseDurableInbox();

        opts.Discovery.DisableConventionalDiscovery().IncludeType(typeof(PaymentCreatedHandler));

        opts.Services.AddDbContextWithWolverineIntegration<AccountingDb>(
            db => db.UseNpgsql(connectionString), Settings.AccountingSchema);
        opts.Services.AddResourceSetupOnStartup();
    }

    public static async Task<int> RunAsync(string[] args)
    {
        var connectionString = Settings.ConnectionString();
        var builder = Host.CreateApplicationBuilder(args);
        builder.UseWolverine(opts => ConfigureWolverine(opts, connectionString));
        using var host = builder.Build();
        await host.StartAsync();
        Console.WriteLine("accounting consumer ready");
        await host.WaitForShutdownAsync();
        return 0;
    }
}
