namespace PaymentsWolverine;

/// <summary>The event the payments service publishes once per payment, through Wolverine's outbox.</summary>
public record PaymentCreated(Guid PaymentId, long AmountCents, string Currency);
