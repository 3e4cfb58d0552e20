// The integration event, as the article defines it.  EventId is generated
// once, when the payment is created, and is the outbox row's id, the AMQP
// message id and the consumer's inbox key on every delivery.
namespace ArticlePayments;

public sealed record PaymentCreated(
    Guid EventId,
    Guid PaymentId,
    decimal Amount,
    string Currency,
    long AggregateVersion,
    DateTimeOffset OccurredAtUtc);
