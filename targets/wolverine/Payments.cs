using JasperFx.Resources;
using Microsoft.EntityFrameworkCore;
using Npgsql;
using Wolverine;
using Wolverine.EntityFrameworkCore;
using Wolverine.Postgresql;
using Wolverine.RabbitMQ;
using Wolverine.Runtime;

namespace PaymentsWolverine;

public class Payment
{
    public Guid Id { get; set; }
    public string IdempotencyKey { get; set; } = "";
    public long AmountCents { get; set; }
    public string Currency { get; set; } = "";
    public Guid EventId { get; set; }
}

public class PaymentsDb(DbContextOptions<PaymentsDb> options) : DbContext(options)
{
    public DbSet<Payment> Payments => Set<Payment>();

    protected override void OnModelCreating(ModelBuilder model)
    {
        var payment = model.Entity<Payment>();
        payment.ToTable("payments");
        payment.Property(p => p.Id).HasColumnName("id");
        payment.Property(p => p.IdempotencyKey).HasColumnName("idempotency_key");
        payment.Property(p => p.AmountCents).HasColumnName("amount_cents");
        payment.Property(p => p.Currency).HasColumnName("currency");
        payment.Property(p => p.EventId).HasColumnName("event_id");
    }
}

public record CreatePayment(decimal Amount, string? Currency);

/// <summary>
/// The payments service: POST /payments stores the payment and its PaymentCreated in one EF Core
/// transaction through Wolverine's EF Core outbox (IDbContextOutbox), which sends the envelope to
/// RabbitMQ after the commit and deletes its outgoing row once the broker confirmed it.
///
/// The same program without HTTP is a second node of the service ("node"): Wolverine's nodes of
/// one service share the envelope tables and take over the outbox of a node that died.
/// </summary>
public static class Payments
{
    /// <summary>Wolverine as its documentation configures a durable outbox on PostgreSQL with EF Core.</summary>
    public static void ConfigureWolverine(WolverineOptions opts, string connectionString)
    {
        opts.ServiceName = "payments";
        opts.PersistMessagesWithPostgresql(connectionString, Settings.PaymentsSchema);
        opts.UseEntityFrameworkCoreTransactions();
        opts.Policies.AutoApplyTransactions();
        opts.Policies.UseDurableOutboxOnAllSendingEndpoints();

        var rabbit = opts.UseRabbitMq(Settings.AmqpUri()).AutoProvision();
        // Off by default, as Wolverine ships it (Balanced mode publishes without confirms); the
        // harness's control run turns them on to show what the unconfirmed publish costs.
        if (Settings.PublisherConfirms())
            rabbit.ConfigureChannelCreation(channel =>
            {
                channel.PublisherConfirmationsEnabled = true;
                channel.PublisherConfirmationTrackingEnabled = true;
            });
        // Every node may run the durability agent, as Wolverine ships it; the harness's control
        // run of a crash-looping producer keeps it off the producer's nodes (profile-agent-on-node.json).
        if (!Settings.DurabilityAgent())
            opts.Durability.DurabilityAgentEnabled = false;
        // The accounting group's queue is bound here too, so a payment made before the
        // consumer's first start is not dropped by an exchange with no binding.
        opts.PublishMessage<PaymentCreated>()
            .ToRabbitExchange(Settings.Exchange, exchange =>
            {
                exchange.ExchangeType = ExchangeType.Fanout;
                exchange.BindQueue(Settings.AccountingQueue);
            });

        // This service handles nothing: PaymentCreated goes to RabbitMQ only.
        opts.Discovery.DisableConventionalDiscovery();

        opts.Services.AddDbContextWithWolverineIntegration<PaymentsDb>(
            db => db.UseNpgsql(connectionString), Settings.PaymentsSchema);
        opts.Services.AddResourceSetupOnStartup();
    }

    public static async Task<int> RunApiAsync(string[] args)
    {
        var connectionString = Settings.ConnectionString();
        var builder = WebApplication.CreateBuilder(args);
        builder.WebHost.UseUrls($"http://127.0.0.1:{Settings.Required("PORT")}");
        builder.Host.UseWolverine(opts => ConfigureWolverine(opts, connectionString));

        var app = builder.Build();
        app.MapGet("/health", () => Results.Ok(new { status = "ok" }));
        app.MapPost("/payments", CreateAsync);
        app.Lifetime.ApplicationStarted.Register(() => Console.WriteLine("payments api ready"));
        await app.RunAsync();
        return 0;
    }

    public static async Task<int> RunNodeAsync(string[] args)
    {
        var connectionString = Settings.ConnectionString();
        var builder = Host.CreateApplicationBuilder(args);
        builder.UseWolverine(opts => ConfigureWolverine(opts, connectionString));
        using var host = builder.Build();
        await host.StartAsync();
        Console.WriteLine("payments node ready");
        await host.WaitForShutdownAsync();
        return 0;
    }

    /// <summary>
    /// A payment and its event in one transaction.  The same Idempotency-Key again answers with
    /// the payment it made (200); a request that lost the race for a key meets the unique
    /// constraint and answers with the winner's payment.
    /// </summary>
    private static async Task<IResult> CreateAsync(HttpRequest request, CreatePayment body,
                                                   IDbContextOutbox<PaymentsDb> outbox)
    {
        var key = request.Headers["Idempotency-Key"].ToString();
        if (key.Length == 0)
            return Results.BadRequest(new { error = "Idempotency-Key is required" });
        if (body.Amount <= 0)
            return Results.UnprocessableEntity(new { error = "amount must be positive" });

        var existing = await FindAsync(outbox.DbContext, key);
        if (existing != null)
            return Results.Ok(Answer(existing));

        var payment = new Payment
        {
            Id = Guid.NewGuid(),
            IdempotencyKey = key,
            AmountCents = (long)decimal.Round(body.Amount * 100),
            Currency = body.Currency ?? "EUR",
        };
        await outbox.PublishAsync(new PaymentCreated(payment.Id, payment.AmountCents, payment.Currency));
        // The envelope Wolverine just created for the event; its id is the AMQP message_id.
        payment.EventId = ((MessageBus)outbox).Outstanding.Single().Id;
        outbox.DbContext.Payments.Add(payment);
        try
        {
            await outbox.SaveChangesAndFlushMessagesAsync();
        }
        catch (DbUpdateException e) when (e.InnerException is PostgresException { SqlState: PostgresErrorCodes.UniqueViolation })
        {
            await using var scope = request.HttpContext.RequestServices.CreateAsyncScope();
            var winner = await FindAsync(scope.ServiceProvider.GetRequiredService<PaymentsDb>(), key);
            return winner != null ? Results.Ok(Answer(winner)) : Results.Conflict(new { error = "key in flight" });
        }
        return Results.Created($"/payments/{payment.Id}", Answer(payment));
    }

    private static Task<Payment?> FindAsync(PaymentsDb db, string key) =>
        db.Payments.AsNoTracking().SingleOrDefaultAsync(p => p.IdempotencyKey == key);

    private static object Answer(Payment p) =>
        new { id = p.Id, amount = p.AmountCents / 100m, currency = p.Currency, event_id = p.EventId };
}
