// The payments API: POST /payments as the article writes it, with the
// Idempotency-Key it says production needs.  The payment, its outbox message
// and the key's record (the request's hash and the answer) are saved by one
// SaveChangesAsync in one transaction, inside the execution strategy's
// delegate; the ids are generated once, before that delegate, so a retried
// transaction writes the same payment and the same event.
using System.Diagnostics;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;
using ArticlePayments.Data;
using Microsoft.AspNetCore.Mvc;
using Microsoft.EntityFrameworkCore;
using Microsoft.EntityFrameworkCore.Storage;
using Npgsql;

namespace ArticlePayments.Api;

public sealed record CreatePaymentRequest(decimal Amount, string? Currency);

public static class PaymentsApi
{
    private const int MaxKeyLength = 200;

    public static async Task<int> RunAsync(string[] args)
    {
        WebApplicationBuilder builder = WebApplication.CreateBuilder(args);
        builder.AddPaymentsServices();
        WebApplication app = builder.Build();

        app.MapPost("/payments", CreatePayment);
        app.MapGet("/payments/{id:guid}", GetPayment);
        app.MapGet("/health", async (NpgsqlDataSource db, CancellationToken ct) =>
        {
            await using NpgsqlCommand ping = db.CreateCommand("SELECT 1");
            await ping.ExecuteScalarAsync(ct);
            return Results.Ok(new { ok = true });
        });

        await app.RunAsync();
        return 0;
    }

    /// <summary>What one request's transaction found or did.</summary>
    private abstract record Outcome
    {
        public sealed record Answered(IdempotencyRecord Record, bool Replayed) : Outcome;
        public sealed record KeyReusedWithOtherRequest : Outcome;
        public sealed record KeyInFlight : Outcome;
    }

    public static async Task<IResult> CreatePayment(
        [FromHeader(Name = "Idempotency-Key")] string? idempotencyKey,
        [FromHeader(Name = "X-Client-Id")] string? clientId,
        CreatePaymentRequest request,
        PaymentsDbContext dbContext,
        TimeProvider timeProvider,
        ILoggerFactory loggers,
        CancellationToken cancellationToken)
    {
        ILogger logger = loggers.CreateLogger("ArticlePayments.Api");
        string currency = (request.Currency ?? "").Trim().ToUpperInvariant();
        if (string.IsNullOrWhiteSpace(idempotencyKey) || idempotencyKey.Length > MaxKeyLength)
            return Results.Problem("an Idempotency-Key header of 1 to 200 characters is required",
                statusCode: StatusCodes.Status400BadRequest);
        if (request.Amount <= 0 || request.Amount > 1_000_000_000m || currency.Length != 3 || !currency.All(char.IsAsciiLetterUpper))
            return Results.Problem("amount must be positive and currency a three-letter code",
                statusCode: StatusCodes.Status400BadRequest);

        // Without authentication the client names itself; the key is unique per client.
        string client = string.IsNullOrWhiteSpace(clientId) ? "anonymous" : clientId.Trim();
        string requestHash = HashRequest(request.Amount, currency);

        // Generated once, before the execution strategy's delegate, and reused
        // by every retry of the transaction.
        Guid paymentId = Guid.NewGuid();
        Guid eventId = Guid.NewGuid();
        DateTimeOffset occurredAtUtc = timeProvider.GetUtcNow();
        string? traceParent = Activity.Current?.Id;

        IExecutionStrategy strategy = dbContext.Database.CreateExecutionStrategy();
        Outcome outcome;
        try
        {
            outcome = await strategy.ExecuteAsync(async Task<Outcome> (CancellationToken ct) =>
            {
                // A retry starts from nothing: what the failed attempt added (or,
                // if SaveChangesAsync had succeeded, accepted) is forgotten.
                dbContext.ChangeTracker.Clear();
                await using IDbContextTransaction transaction =
                    await dbContext.Database.BeginTransactionAsync(ct);

                // Another request holding this key is in flight: answer at once
                // rather than wait for its transaction.
                bool ours = await dbContext.Database
                    .SqlQuery<bool>($"SELECT pg_try_advisory_xact_lock(hashtextextended({client + "\n" + idempotencyKey}, 0)) AS \"Value\"")
                    .SingleAsync(ct);
                if (!ours)
                    return new Outcome.KeyInFlight();

                // The key's record settles a retry, and a commit whose answer was
                // lost: if that transaction committed, its record is here.
                IdempotencyRecord? existing = await dbContext.IdempotencyRecords.AsNoTracking()
                    .SingleOrDefaultAsync(r => r.ClientId == client && r.Key == idempotencyKey, ct);
                if (existing is not null)
                {
                    return existing.RequestHash == requestHash
                        ? new Outcome.Answered(existing, Replayed: true)
                        : new Outcome.KeyReusedWithOtherRequest();
                }

                IdempotencyRecord record = Stage(dbContext, client, idempotencyKey, requestHash, paymentId,
                    eventId, request.Amount, currency, occurredAtUtc, traceParent);
                await dbContext.SaveChangesAsync(ct);
                await transaction.CommitAsync(ct);
                return new Outcome.Answered(record, Replayed: false);
            }, cancellationToken);
        }
        catch (Exception e) when (e is RetryLimitExceededException or NpgsqlException or DbUpdateException)
        {
            logger.LogWarning("event=payment_failed key={Key} error={Error}", idempotencyKey, e.GetBaseException().Message);
            return Busy(StatusCodes.Status503ServiceUnavailable, "the database is unavailable; send the same request again");
        }

        switch (outcome)
        {
            case Outcome.Answered answered:
                logger.LogInformation("event={Event} key={Key} payment_id={PaymentId} event_id={EventId}",
                    answered.Replayed ? "replay" : "commit", idempotencyKey, answered.Record.PaymentId, answered.Record.EventId);
                return Stored(answered.Record, answered.Replayed);
            case Outcome.KeyInFlight:
                logger.LogInformation("event=key_in_flight key={Key}", idempotencyKey);
                return Busy(StatusCodes.Status409Conflict, "a request with this Idempotency-Key is in progress");
            default:
                logger.LogInformation("event=key_reused key={Key}", idempotencyKey);
                return Results.Problem("this Idempotency-Key was used with another request",
                    statusCode: StatusCodes.Status422UnprocessableEntity);
        }
    }

    /// <summary>The article's handler body: the payment and its PaymentCreated
    /// outbox message, and beside them the key's record with the answer.</summary>
    private static IdempotencyRecord Stage(PaymentsDbContext dbContext, string client, string key,
        string requestHash, Guid paymentId, Guid eventId, decimal amount, string currency,
        DateTimeOffset occurredAtUtc, string? traceParent)
    {
        Payment payment = Payment.Create(paymentId, amount, currency, occurredAtUtc);
        PaymentCreated paymentCreated = new(eventId, payment.Id, payment.Amount, payment.Currency,
            payment.Version, occurredAtUtc);
        string payload = JsonSerializer.Serialize(paymentCreated);
        OutboxMessage outboxMessage = OutboxMessage.Create(paymentCreated.EventId, "payment",
            paymentCreated.PaymentId, paymentCreated.AggregateVersion, nameof(PaymentCreated), 1, payload,
            traceParent, occurredAtUtc);
        IdempotencyRecord record = new()
        {
            ClientId = client, Key = key, RequestHash = requestHash, PaymentId = payment.Id,
            EventId = eventId, ResponseStatus = StatusCodes.Status201Created,
            ResponseBody = JsonSerializer.Serialize(new { id = payment.Id, status = payment.Status }),
            CreatedAt = occurredAtUtc,
        };
        dbContext.Payments.Add(payment);
        dbContext.OutboxMessages.Add(outboxMessage);
        dbContext.IdempotencyRecords.Add(record);
        return record;
    }

    /// <summary>The stored answer, byte for byte, whether this request made it
    /// or an earlier one with the same key and body did.</summary>
    private static IResult Stored(IdempotencyRecord record, bool replayed) => new StoredAnswer(record, replayed);

    private sealed class StoredAnswer(IdempotencyRecord record, bool replayed) : IResult
    {
        public Task ExecuteAsync(HttpContext http)
        {
            http.Response.StatusCode = record.ResponseStatus;
            http.Response.Headers.Location = $"/payments/{record.PaymentId}";
            if (replayed)
                http.Response.Headers["Idempotent-Replayed"] = "true";
            http.Response.ContentType = "application/json";
            return http.Response.WriteAsync(record.ResponseBody);
        }
    }

    private static IResult Busy(int status, string detail) => new BusyAnswer(status, detail);

    /// <summary>A problem answer that tells the client when to send the same
    /// request again.</summary>
    private sealed class BusyAnswer(int status, string detail) : IResult
    {
        public Task ExecuteAsync(HttpContext http)
        {
            http.Response.Headers.RetryAfter = "1";
            return Results.Problem(detail, statusCode: status).ExecuteAsync(http);
        }
    }

    /// <summary>SHA-256 of the request in a canonical form: 12.5 and 12.50 EUR
    /// are the same request.</summary>
    private static string HashRequest(decimal amount, string currency)
    {
        string canonical = string.Create(CultureInfo.InvariantCulture,
            $"POST /payments\namount={amount:0.############################}\ncurrency={currency}");
        return Convert.ToHexStringLower(SHA256.HashData(Encoding.UTF8.GetBytes(canonical)));
    }

    public static async Task<IResult> GetPayment(Guid id, PaymentsDbContext dbContext, CancellationToken ct)
    {
        Payment? payment = await dbContext.Payments.AsNoTracking().SingleOrDefaultAsync(p => p.Id == id, ct);
        return payment is null
            ? Results.NotFound()
            : Results.Ok(new { payment.Id, payment.Amount, payment.Currency, payment.Status, payment.Version });
    }
}
