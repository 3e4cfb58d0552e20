// The accounting consumer's side of the broker: manual acknowledgements, one
// delivery at a time, each handled in a scope of its own and ACKed only after
// its transaction committed.  A delivery that could not be handled is
// requeued (nothing was committed); one that is not a PaymentCreated is
// rejected.  The connection is opened again whenever it is lost.
using System.Diagnostics;
using System.Text;
using System.Text.Json;
using ArticlePayments.Messaging;
using Microsoft.Extensions.Options;
using RabbitMQ.Client;
using RabbitMQ.Client.Events;

namespace ArticlePayments.Accounting;

public sealed class AccountingConsumer(IServiceScopeFactory scopeFactory, IOptions<RabbitMqOptions> options,
    ILogger<AccountingConsumer> logger) : BackgroundService
{
    private static readonly TimeSpan ReconnectDelay = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan RequeueDelay = TimeSpan.FromSeconds(1);
    private readonly RabbitMqOptions _options = options.Value;

    protected override async Task ExecuteAsync(CancellationToken stoppingToken)
    {
        bool ready = false;
        while (!stoppingToken.IsCancellationRequested)
        {
            IConnection? connection = null;
            try
            {
                connection = await RabbitMqTopology.Factory(_options, "article-accounting")
                    .CreateConnectionAsync(stoppingToken);
                IChannel channel = await connection.CreateChannelAsync(cancellationToken: stoppingToken);
                TaskCompletionSource lost = new(TaskCreationOptions.RunContinuationsAsynchronously);
                connection.ConnectionShutdownAsync += (_, _) => { lost.TrySetResult(); return Task.CompletedTask; };
                channel.ChannelShutdownAsync += (_, _) => { lost.TrySetResult(); return Task.CompletedTask; };

                await RabbitMqTopology.DeclareAsync(channel, _options, stoppingToken);
                await channel.BasicQosAsync(prefetchSize: 0, prefetchCount: _options.Prefetch, global: false,
                    cancellationToken: stoppingToken);
                AsyncEventingBasicConsumer consumer = new(channel);
                consumer.ReceivedAsync += (_, delivery) => OnDeliveryAsync(channel, delivery, stoppingToken);
                await channel.BasicConsumeAsync(_options.Queue, autoAck: false, consumer, stoppingToken);
                if (!ready)
                {
                    logger.LogInformation("consumer ready");
                    ready = true;
                }
                await lost.Task.WaitAsync(stoppingToken);
                logger.LogWarning("event=broker_lost: consuming again");
            }
            catch (OperationCanceledException) when (stoppingToken.IsCancellationRequested)
            {
                break;
            }
            catch (Exception e)
            {
                logger.LogWarning("event=broker_unavailable error={Error}", Outbox.ErrorText.Sanitize(e.Message));
            }
            finally
            {
                if (connection is not null)
                {
                    await connection.AbortAsync(TimeSpan.FromSeconds(2));
                    connection.Dispose();
                }
            }
            await Task.Delay(ReconnectDelay, stoppingToken);
        }
    }

    private async Task OnDeliveryAsync(IChannel channel, BasicDeliverEventArgs delivery, CancellationToken ct)
    {
        PaymentCreated? message;
        try
        {
            message = JsonSerializer.Deserialize<PaymentCreated>(delivery.Body.Span);
        }
        catch (JsonException)
        {
            message = null;
        }
        if (message is null || message.EventId == Guid.Empty)
        {
            logger.LogError("event=reject delivery_tag={Tag} message_id={MessageId}: not a PaymentCreated",
                delivery.DeliveryTag, delivery.BasicProperties.MessageId);
            await channel.BasicRejectAsync(delivery.DeliveryTag, requeue: false, ct);
            return;
        }

        // A new span, a child of the producer's: the traceparent correlates,
        // the EventId deduplicates.
        using Activity? activity = Hosting.Tracing.StartActivity("accounting PaymentCreated", ActivityKind.Consumer,
            ParentOf(delivery.BasicProperties));
        HandleOutcome outcome;
        try
        {
            await using AsyncServiceScope scope = scopeFactory.CreateAsyncScope();
            PaymentCreatedHandler handler = scope.ServiceProvider.GetRequiredService<PaymentCreatedHandler>();
            outcome = await handler.HandleAsync(message, ct);
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            logger.LogWarning("event=requeue message_id={MessageId} error={Error}", message.EventId,
                Outbox.ErrorText.Sanitize(e.GetBaseException().Message));
            await Task.Delay(RequeueDelay, ct);
            await channel.BasicNackAsync(delivery.DeliveryTag, multiple: false, requeue: true, ct);
            return;
        }

        switch (outcome)
        {
            case HandleOutcome.Applied:
                logger.LogInformation("event=apply message_id={MessageId} payment_id={PaymentId} redelivered={Redelivered} trace_id={TraceId}",
                    message.EventId, message.PaymentId, delivery.Redelivered, activity?.TraceId);
                break;
            case HandleOutcome.Duplicate:
                logger.LogInformation("event=inbox_dup message_id={MessageId} redelivered={Redelivered}",
                    message.EventId, delivery.Redelivered);
                break;
            default:
                logger.LogError("event=version_anomaly message_id={MessageId} payment_id={PaymentId} version={Version}: parked, not applied",
                    message.EventId, message.PaymentId, message.AggregateVersion);
                break;
        }
        // After the COMMIT, never before: a crash between the two redelivers the
        // message, and the inbox marker keeps the copy from applying twice.
        await channel.BasicAckAsync(delivery.DeliveryTag, multiple: false, ct);
        logger.LogInformation("event=ack message_id={MessageId}", message.EventId);
    }

    private static ActivityContext ParentOf(IReadOnlyBasicProperties properties)
    {
        if (properties.Headers?.TryGetValue("traceparent", out object? value) == true && value is byte[] bytes &&
            ActivityContext.TryParse(Encoding.UTF8.GetString(bytes), null, out ActivityContext parent))
            return parent;
        return default;
    }
}
