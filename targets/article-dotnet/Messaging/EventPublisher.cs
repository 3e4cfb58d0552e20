// The relay's side of the broker: the article's IEventPublisher, and its
// RabbitMQ implementation (RabbitMQ.Client 7) with publisher confirms.
using System.Text;
using Microsoft.Extensions.Options;
using RabbitMQ.Client;

namespace ArticlePayments.Messaging;

public interface IEventPublisher
{
    /// <summary>Returns once the broker has taken responsibility for the message
    /// (its confirm); throws if it refused it, could not route it, or did not
    /// answer in time.  The same messageId on every attempt.</summary>
    Task PublishAsync(Guid messageId, string eventType, string payload, string? traceParent,
        CancellationToken cancellationToken);
}

public static class RabbitMqTopology
{
    /// <summary>The payments exchange, the accounting queue and its binding,
    /// durable.  Declared by the relay and the consumer alike (declarations are
    /// idempotent), so a message is never published before its queue exists.</summary>
    public static async Task DeclareAsync(IChannel channel, RabbitMqOptions options, CancellationToken ct)
    {
        await channel.ExchangeDeclareAsync(options.Exchange, ExchangeType.Topic, durable: true,
            autoDelete: false, cancellationToken: ct);
        await channel.QueueDeclareAsync(options.Queue, durable: true, exclusive: false, autoDelete: false,
            cancellationToken: ct);
        await channel.QueueBindAsync(options.Queue, options.Exchange, Hosting.RoutingKey, cancellationToken: ct);
    }

    public static ConnectionFactory Factory(RabbitMqOptions options, string clientName) => new()
    {
        Uri = new Uri(options.Uri),
        ClientProvidedName = clientName,
        // Reconnection is explicit (the publisher opens a new connection on the
        // next publish, the consumer's loop consumes again): no channel is ever
        // used while the library is recovering it in the background.
        AutomaticRecoveryEnabled = false,
        RequestedConnectionTimeout = TimeSpan.FromSeconds(5),
        RequestedHeartbeat = TimeSpan.FromSeconds(10),
    };
}

/// <summary>One connection and one confirm channel, opened on first use and
/// again after any failure.  The relay publishes one message at a time, so a
/// lock is all the concurrency it needs.</summary>
public sealed class RabbitMqEventPublisher(IOptions<RabbitMqOptions> options, ILogger<RabbitMqEventPublisher> logger)
    : IEventPublisher, IAsyncDisposable
{
    private static readonly TimeSpan ConfirmTimeout = TimeSpan.FromSeconds(10);
    private readonly RabbitMqOptions _options = options.Value;
    private readonly SemaphoreSlim _lock = new(1, 1);
    private IConnection? _connection;
    private IChannel? _channel;

    public async Task PublishAsync(Guid messageId, string eventType, string payload, string? traceParent,
        CancellationToken cancellationToken)
    {
        await _lock.WaitAsync(cancellationToken);
        try
        {
            using CancellationTokenSource deadline = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            deadline.CancelAfter(ConfirmTimeout);
            try
            {
                IChannel channel = await OpenAsync(deadline.Token);
                BasicProperties properties = new()
                {
                    MessageId = messageId.ToString(),
                    Type = eventType,
                    ContentType = "application/json",
                    Persistent = true,
                    Headers = new Dictionary<string, object?>(),
                };
                if (traceParent is not null)
                    properties.Headers["traceparent"] = Encoding.UTF8.GetBytes(traceParent);
                // With confirmation tracking, this returns when the broker confirms;
                // mandatory makes an unroutable message a failure, not a silent drop.
                await channel.BasicPublishAsync(_options.Exchange, Hosting.RoutingKey, mandatory: true,
                    basicProperties: properties, body: Encoding.UTF8.GetBytes(payload),
                    cancellationToken: deadline.Token);
            }
            catch
            {
                // Whatever the channel's state, it is not trusted again.
                await CloseAsync();
                throw;
            }
        }
        finally
        {
            _lock.Release();
        }
    }

    private async Task<IChannel> OpenAsync(CancellationToken ct)
    {
        if (_channel is { IsOpen: true } && _connection is { IsOpen: true })
            return _channel;
        await CloseAsync();
        _connection = await RabbitMqTopology.Factory(_options, "article-relay").CreateConnectionAsync(ct);
        _channel = await _connection.CreateChannelAsync(
            new CreateChannelOptions(publisherConfirmationsEnabled: true, publisherConfirmationTrackingEnabled: true),
            ct);
        await RabbitMqTopology.DeclareAsync(_channel, _options, ct);
        logger.LogInformation("event=broker_connected exchange={Exchange}", _options.Exchange);
        return _channel;
    }

    private async Task CloseAsync()
    {
        IChannel? channel = _channel;
        IConnection? connection = _connection;
        _channel = null;
        _connection = null;
        try
        {
            // Abort, not close: a broker that is gone would keep a graceful
            // close waiting for its answer.
            if (connection is not null)
            {
                await connection.AbortAsync(TimeSpan.FromSeconds(2));
                await connection.DisposeAsync();
            }
            channel?.Dispose();
        }
        catch (Exception e)
        {
            logger.LogDebug("closing a failed broker connection: {Error}", e.Message);
        }
    }

    public async ValueTask DisposeAsync() => await CloseAsync();
}
