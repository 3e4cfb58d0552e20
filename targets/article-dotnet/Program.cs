// The article's payments service (Outbox e Inbox en ASP.NET Core), one
// program whose first argument is the role of the process:
//   api        POST /payments (minimal API, EF Core, Idempotency-Key)
//   relay      the outbox relay (a BackgroundService)
//   consumer   the accounting consumer (inbox + ledger)
//   dead-letters | requeue ID   the runbook's operations on dead letters
// Configuration comes from the environment: ConnectionStrings__Payments (an
// Npgsql connection string), RabbitMq__Uri, RabbitMq__Exchange,
// RabbitMq__Queue, Outbox__LeaseSeconds, Outbox__BatchSize,
// Outbox__MaxAttempts, Accounting__ConsumerName, ASPNETCORE_URLS.
using ArticlePayments;
using ArticlePayments.Accounting;
using ArticlePayments.Api;
using ArticlePayments.Messaging;
using ArticlePayments.Outbox;

string role = args.Length > 0 ? args[0] : "";
string[] rest = args.Skip(1).ToArray();
switch (role)
{
    case "api":
        return await PaymentsApi.RunAsync(rest);
    case "relay":
    {
        HostApplicationBuilder builder = Host.CreateApplicationBuilder(rest);
        builder.AddPaymentsServices();
        builder.Services.Configure<OutboxOptions>(builder.Configuration.GetSection("Outbox"));
        builder.Services.AddSingleton<IEventPublisher, RabbitMqEventPublisher>();
        builder.Services.AddScoped<OutboxRepository>();
        builder.Services.AddScoped<OutboxRelay>();
        builder.Services.AddHostedService<OutboxWorker>();
        await builder.Build().RunAsync();
        return 0;
    }
    case "consumer":
    {
        HostApplicationBuilder builder = Host.CreateApplicationBuilder(rest);
        builder.AddPaymentsServices();
        builder.Services.Configure<AccountingOptions>(builder.Configuration.GetSection("Accounting"));
        builder.Services.AddScoped<PaymentCreatedHandler>();
        builder.Services.AddHostedService<AccountingConsumer>();
        await builder.Build().RunAsync();
        return 0;
    }
    case "dead-letters":
        return await Runbook.ListDeadLettersAsync(rest);
    case "requeue":
        return await Runbook.RequeueAsync(rest);
    default:
        Console.Error.WriteLine("usage: ArticlePayments api | relay | consumer | dead-letters | requeue MESSAGE_ID");
        return 2;
}
