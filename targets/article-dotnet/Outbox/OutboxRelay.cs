// One iteration of the relay, as the article writes it: claim a batch, then
// publish each message outside any transaction and mark it, or schedule its
// retry.  The window between the broker's confirm and the mark is left open
// on purpose: a relay that dies there publishes the message again, under the
// same id, and the consumer's inbox absorbs the copy.
using ArticlePayments.Messaging;

namespace ArticlePayments.Outbox;

public sealed class OutboxRelay(OutboxRepository repository, IEventPublisher eventPublisher, ILogger<OutboxRelay> logger)
{
    /// <summary>Returns how many messages it claimed.  A failure to publish is
    /// scheduled and does not stop the batch; a failure to persist the retry
    /// is thrown, never taken for success.</summary>
    public async Task<int> RunBatchAsync(CancellationToken cancellationToken)
    {
        // A lock id per claim, not per process: the fence then names one lease,
        // and a stale settle from an earlier claim of this same relay misses too.
        Guid workerId = Guid.NewGuid();
        IReadOnlyList<ClaimedOutboxMessage> batch = await repository.ClaimAsync(workerId, cancellationToken);
        if (batch.Count > 0)
            logger.LogInformation("event=claim count={Count} lock_id={LockId}", batch.Count, workerId);
        foreach (ClaimedOutboxMessage message in batch)
            await PublishAsync(message, workerId, cancellationToken);
        return batch.Count;
    }

    public async Task PublishAsync(ClaimedOutboxMessage message, Guid workerId, CancellationToken cancellationToken)
    {
        try
        {
            await eventPublisher.PublishAsync(message.Id, message.EventType, message.Payload, message.TraceParent,
                cancellationToken);
            logger.LogInformation("event=publish message_id={MessageId} attempts={Attempts}", message.Id, message.Attempts);

            bool marked = await repository.MarkPublishedAsync(message.Id, workerId, cancellationToken);
            if (marked)
                logger.LogInformation("event=mark message_id={MessageId}", message.Id);
            else
                logger.LogWarning("event=lease_lost message_id={MessageId}: published, but another relay holds it now",
                    message.Id);
        }
        catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
        {
            throw;
        }
        catch (Exception exception)
        {
            TimeSpan delay = RetryPolicy.JitteredDelay(message.Attempts);
            RetryOutcome outcome = await repository.ScheduleRetryAsync(message.Id, workerId, delay, exception.Message,
                cancellationToken);
            string error = ErrorText.Sanitize(exception.Message);
            switch (outcome)
            {
                case RetryOutcome.DeadLettered:
                    logger.LogError("event=dead_letter message_id={MessageId} attempts={Attempts} error={Error}",
                        message.Id, message.Attempts, error);
                    break;
                case RetryOutcome.Scheduled:
                    logger.LogWarning("event=retry message_id={MessageId} attempts={Attempts} delay_ms={DelayMs} error={Error}",
                        message.Id, message.Attempts, (long)delay.TotalMilliseconds, error);
                    break;
                default:
                    logger.LogWarning("event=lease_lost message_id={MessageId}: failed, and another relay holds it now",
                        message.Id);
                    break;
            }
        }
    }
}
