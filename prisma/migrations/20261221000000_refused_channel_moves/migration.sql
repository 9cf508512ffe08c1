-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "movedAt" TIMESTAMP(3),
ADD COLUMN     "movedBecause" TEXT,
ADD COLUMN     "movedTo" TEXT;

-- AlterTable
ALTER TABLE "Review" ADD COLUMN     "channelId" TEXT;

-- AlterTable
ALTER TABLE "FlowRequest" ADD COLUMN     "movedAt" TIMESTAMP(3),
ADD COLUMN     "movedBecause" TEXT,
ADD COLUMN     "movedFrom" TEXT;

