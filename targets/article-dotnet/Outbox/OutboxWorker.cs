// The relay's loop: a BackgroundService (a singleton) that takes a new scope
// for every iteration, so no scoped service lives as long as the process.
namespace ArticlePayments.Outbox;

public sealed class OutboxWorker(IServiceScopeFactory scopeFactory, Microsoft.Extensions.Options.IOptions<OutboxOptions> options,
    ILogger<OutboxWorker> logger) : BackgroundService
{
    private static readonly TimeSpan FailureDelay = TimeSpan.FromSeconds(1);

    protected override async Task ExecuteAsync(CancellationToken stoppingToken)
    {
        TimeSpan idleDelay = TimeSpan.FromMilliseconds(options.Value.IdleDelayMilliseconds);
        bool ready = false;
        while (!stoppingToken.IsCancellationRequested)
        {
            int processed;
            try
            {
                await using AsyncServiceScope scope = scopeFactory.CreateAsyncScope();
                OutboxRelay relay = scope.ServiceProvider.GetRequiredService<OutboxRelay>();
                processed = await relay.RunBatchAsync(stoppingToken);
            }
            catch (OperationCanceledException) when (stoppingToken.IsCancellationRequested)
            {
                break;
            }
            catch (Exception e)
            {
                // The article lets this error propagate out of the batch; here it
                // ends the iteration, not the process: the claimed messages'
                // leases run out and a later iteration claims them again.
                logger.LogError("event=iteration_failed error={Error}", Outbox.ErrorText.Sanitize(e.Message));
                await Task.Delay(FailureDelay, stoppingToken);
                continue;
            }
            if (!ready)
            {
                logger.LogInformation("relay ready");
                ready = true;
            }
            if (processed == 0)
                await Task.Delay(idleDelay, stoppingToken);
        }
    }
}
