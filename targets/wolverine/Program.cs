// A payments service on Wolverine, tested from outside by crashwindow (profile.json beside it).
// One program, four roles, so the service builds once:
//   setup     the application's tables (Wolverine makes its own when a process starts)
//   api       POST /payments, through Wolverine's EF Core outbox
//   node      a second node of the payments service, without HTTP
//   consumer  the accounting consumer, Wolverine's durable inbox on RabbitMQ
using PaymentsWolverine;

var role = args.Length > 0 ? args[0] : "";
var rest = args.Skip(1).ToArray();
try
{
    return role switch
    {
        "setup" => await Schema.SetupAsync(),
        "api" => await Payments.RunApiAsync(rest),
        "node" => await Payments.RunNodeAsync(rest),
        "consumer" => await Accounting.RunAsync(rest),
        _ => Usage(),
    };
}
catch (Exception e)
{
    Console.Error.WriteLine($"payments-wolverine {role}: {e.GetType().Name}: {e.Message}");
    return 1;
}

static int Usage()
{
    Console.Error.WriteLine("usage: PaymentsWolverine setup|api|node|consumer");
    return 2;
}
