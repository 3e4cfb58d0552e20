// When a failed message is tried again, and what of its error is kept.
using System.Text.RegularExpressions;

namespace ArticlePayments.Outbox;

public static class RetryPolicy
{
    /// <summary>The article's bounded exponential backoff: 2^attempts seconds,
    /// the exponent capped at 9 and the delay at 300 s.</summary>
    public static TimeSpan RetryDelay(int attempts)
    {
        int exponent = Math.Min(attempts, 9);
        double seconds = Math.Pow(2, exponent);
        return TimeSpan.FromSeconds(Math.Min(seconds, 300));
    }

    /// <summary>RetryDelay with jitter, drawn when the retry is scheduled (and
    /// then persisted in next_attempt_at): between half the delay and all of
    /// it, so relays that failed together do not try again together.</summary>
    public static TimeSpan JitteredDelay(int attempts)
    {
        TimeSpan delay = RetryDelay(attempts);
        return delay / 2 + delay / 2 * Random.Shared.NextDouble();
    }
}

public static partial class ErrorText
{
    private const int MaxLength = 500;

    /// <summary>An exception message fit to persist: credentials in URIs and
    /// key=value pairs masked, control characters removed, length bounded.</summary>
    public static string Sanitize(string message)
    {
        string text = UriCredentials().Replace(message, "${scheme}://***@");
        text = SecretPairs().Replace(text, "${key}=***");
        text = new string(text.Select(c => char.IsControl(c) ? ' ' : c).ToArray());
        return text.Length <= MaxLength ? text : text[..MaxLength] + "...";
    }

    [GeneratedRegex(@"(?<scheme>[a-zA-Z][a-zA-Z0-9+.-]*)://[^/\s@]+@")]
    private static partial Regex UriCredentials();

    [GeneratedRegex(@"(?<key>password|pwd|secret|token|api[_-]?key)\s*=\s*[^;\s,]+", RegexOptions.IgnoreCase)]
    private static partial Regex SecretPairs();
}
