// What every role shares: configuration, one NpgsqlDataSource (the relay's
// explicit SQL and EF Core use the same pool), EF Core with its retrying
// execution strategy, one-line logs, and a listener that makes Activity ids
// (the W3C traceparent) exist without an exporter.
using System.Diagnostics;
using ArticlePayments.Data;
using Microsoft.EntityFrameworkCore;
using Npgsql;

namespace ArticlePayments;

public sealed class RabbitMqOptions
{
    public string Uri { get; set; } = "amqp://guest:guest@localhost:5672/";
    public string Exchange { get; set; } = "payments";
    /// <summary>The accounting consumer's queue.  The relay declares it too, so
    /// that an event published before the consumer's first start is kept.</summary>
    public string Queue { get; set; } = "accounting";
    public ushort Prefetch { get; set; } = 10;
}

public static class Hosting
{
    public const string RoutingKey = nameof(PaymentCreated);

    public static readonly ActivitySource Tracing = new("ArticlePayments");

    public static void AddPaymentsServices(this IHostApplicationBuilder builder)
    {
        string connectionString = builder.Configuration.GetConnectionString("Payments")
            ?? throw new InvalidOperationException("ConnectionStrings__Payments is not set");
        builder.Services.AddSingleton(_ => NpgsqlDataSource.Create(connectionString));
        builder.Services.AddDbContext<PaymentsDbContext>((services, options) =>
            options.UseNpgsql(services.GetRequiredService<NpgsqlDataSource>(), npgsql =>
                // Transient failures (a dropped connection, a server restarting)
                // re-run the whole unit of work: see the delegates given to
                // CreateExecutionStrategy().ExecuteAsync.
                npgsql.EnableRetryOnFailure(maxRetryCount: 4, maxRetryDelay: TimeSpan.FromSeconds(2),
                    errorCodesToAdd: null)));
        builder.Services.AddSingleton(TimeProvider.System);
        builder.Services.Configure<RabbitMqOptions>(builder.Configuration.GetSection("RabbitMq"));
        builder.Services.Configure<HostOptions>(o => o.ShutdownTimeout = TimeSpan.FromSeconds(5));

        builder.Logging.ClearProviders();
        builder.Logging.AddSimpleConsole(o =>
        {
            o.SingleLine = true;
            o.TimestampFormat = "HH:mm:ss.fff ";
        });
        builder.Logging.AddFilter("Microsoft", LogLevel.Warning);
        builder.Logging.AddFilter("System.Net.Http", LogLevel.Warning);

        ListenToActivities();
    }

    /// <summary>Samples every activity, so ASP.NET Core starts one per request
    /// (continuing an incoming traceparent) and Activity.Current?.Id is the W3C
    /// id the article stores.  An OpenTelemetry SDK would do the same and
    /// export them; nothing here exports.</summary>
    private static void ListenToActivities()
    {
        ActivitySource.AddActivityListener(new ActivityListener
        {
            ShouldListenTo = _ => true,
            Sample = (ref ActivityCreationOptions<ActivityContext> _) => ActivitySamplingResult.AllData,
        });
    }
}
