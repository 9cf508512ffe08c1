-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "stopClaimedBy" TEXT;

-- AlterTable
ALTER TABLE "Review" ADD COLUMN     "claimedBy" TEXT,
ADD COLUMN     "deadlineClaimedBy" TEXT;

-- AlterTable
ALTER TABLE "FlowRequest" ADD COLUMN     "claimedBy" TEXT,
ADD COLUMN     "deadlineClaimedBy" TEXT;

